"""Shared pieces of the Python client tests: one server per test module,
conformance cases, and numpy reference implementations of the operators."""

import glob
import json
import os
import unittest

import numpy as np

from dmlserve.v1 import dmlserve_pb2
from dmlserve_client import Client, tensor_from_numpy, numpy_dtype
from server_process import ServerProcess, server_binary

CONFORMANCE_DIR = os.environ.get(
    "DMLSERVE_CONFORMANCE_DIR",
    os.path.join(os.path.dirname(__file__), "..", "conformance"))


class ServerTestCase(unittest.TestCase):
    """Starts dmlserve once for the class (with SERVER_ARGS and SERVER_ENV added to its
    environment) and connects a Client."""

    SERVER_ARGS = ()
    SERVER_ENV = {}

    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess(server_binary(), extra_args=cls.SERVER_ARGS,
                                   extra_env=cls.SERVER_ENV)
        cls.client = Client(cls.server.grpc_address, timeout=120)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        code = cls.server.stop()
        if code != 0:
            raise AssertionError(f"dmlserve exited with {code}:\n" + "".join(cls.server.output))

    def assert_server_still_answers(self):
        values = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
        np.testing.assert_array_equal(self.client.cumsum(values, axis=1),
                                      np.cumsum(values, axis=1))


def friendly_tensor(json_tensor):
    """{"data_type", "sizes", "values"} -> numpy array of that type and shape."""
    dtype = numpy_dtype(json_tensor["data_type"])
    return np.array(json_tensor["values"], dtype=dtype).reshape(json_tensor["sizes"])


def conformance_cases():
    cases = []
    for path in sorted(glob.glob(os.path.join(CONFORMANCE_DIR, "*.json"))):
        with open(path) as f:
            cases.extend(json.load(f)["cases"])
    return cases


def request_from_case(case):
    """The ExecuteRequest a conformance case describes."""
    op = case["operator"]
    direction = dmlserve_pb2.AxisDirection.Value(
        case.get("axis_direction", "AXIS_DIRECTION_INCREASING"))
    if op == "cumulative_summation":
        return dmlserve_pb2.ExecuteRequest(
            request_id=case["name"],
            cumulative_summation=dmlserve_pb2.CumulativeSummation(
                input=tensor_from_numpy(friendly_tensor(case["input"])), axis=case["axis"],
                axis_direction=direction, has_exclusive_sum=case["has_exclusive_sum"]))
    if op == "cumulative_product":
        return dmlserve_pb2.ExecuteRequest(
            request_id=case["name"],
            cumulative_product=dmlserve_pb2.CumulativeProduct(
                input=tensor_from_numpy(friendly_tensor(case["input"])), axis=case["axis"],
                axis_direction=direction, has_exclusive_product=case["has_exclusive_product"]))
    assert op == "quantized_linear_matrix_multiply", op
    message = dmlserve_pb2.QuantizedLinearMatrixMultiply()
    for field in ("a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point",
                  "output_scale", "output_zero_point"):
        if field in case:
            getattr(message, field).CopyFrom(tensor_from_numpy(friendly_tensor(case[field])))
    if "output_data_type" in case:
        message.output_data_type = dmlserve_pb2.DataType.Value(case["output_data_type"])
    return dmlserve_pb2.ExecuteRequest(request_id=case["name"],
                                       quantized_linear_matrix_multiply=message)


# numpy references. Integers wrap modulo 2^bits, as the spec requires.

def reference_scan(x, axis, reverse, exclusive, product):
    """Cumulative sum/product of x along axis; integers wrap, floats in float64."""
    if x.dtype.kind in "iu":
        wide = np.uint64 if x.dtype.kind == "u" else np.int64
    else:
        wide = np.float64
    data = x.astype(wide)
    if reverse:
        data = np.flip(data, axis)
    with np.errstate(over="ignore"):
        out = np.cumprod(data, axis=axis, dtype=wide) if product else np.cumsum(
            data, axis=axis, dtype=wide)
    if exclusive:
        identity = np.ones_like(np.take(out, [0], axis=axis)) if product else np.zeros_like(
            np.take(out, [0], axis=axis))
        out = np.concatenate([identity, np.delete(out, -1, axis=axis)], axis=axis)
    if reverse:
        out = np.flip(out, axis)
    if x.dtype.kind in "iu":
        return out.astype(x.dtype)  # Truncation to the element width is the wrap.
    return out


def scan_magnitude(x, axis, reverse, exclusive, product):
    """The prefix sums/products of |x|: the scale of float rounding errors."""
    return reference_scan(np.abs(x.astype(np.float64)), axis, reverse, exclusive, product)


def pad4(array):
    return array.reshape((1,) * (4 - array.ndim) + array.shape)


def reference_qmatmul(a, a_scale, b, b_scale, output_scale, output_dtype,
                      a_zero_point=None, b_zero_point=None, output_zero_point=None):
    """Exact integer accumulation, float64 requantization, round half to even, clamp.

    Returns (expected, tie_mask): tie_mask marks outputs whose float64 value lies within
    1e-5 (relative) of a .5 tie, where the spec accepts +-1.
    """
    a4, b4 = pad4(a).astype(np.int64), pad4(b).astype(np.int64)
    za = 0 if a_zero_point is None else pad4(a_zero_point).astype(np.int64)
    zb = 0 if b_zero_point is None else pad4(b_zero_point).astype(np.int64)
    zo = 0 if output_zero_point is None else pad4(output_zero_point).astype(np.float64)
    acc = np.matmul(a4 - za, b4 - zb)  # int64, exact; broadcasts batch/channel.
    real = (acc.astype(np.float64) * pad4(a_scale).astype(np.float64) *
            pad4(b_scale).astype(np.float64) / pad4(output_scale).astype(np.float64))
    fraction = np.abs(real - np.floor(real))
    tie_mask = np.abs(fraction - 0.5) <= 1e-5 * np.abs(real)
    info = np.iinfo(output_dtype)
    expected = np.clip(np.round(real) + zo, info.min, info.max).astype(output_dtype)
    out_ndim = max(a.ndim, b.ndim)
    return (expected.reshape(expected.shape[4 - out_ndim:]),
            tie_mask.reshape(tie_mask.shape[4 - out_ndim:]))
