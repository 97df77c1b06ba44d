"""Bad requests: each gets the right gRPC code and a message naming the field, and the
server keeps answering correctly afterwards (unary and mid-stream)."""

import unittest

import grpc
import numpy as np

from client_test_support import ServerTestCase
from dmlserve.v1 import dmlserve_pb2
from dmlserve_client import Client, DmlserveError, tensor_from_numpy, tensor_ref

MAX_REQUEST_BYTES = 1 << 20
INVALID = grpc.StatusCode.INVALID_ARGUMENT


def scan_request(tensor, axis=0, product=False):
    if product:
        return dmlserve_pb2.ExecuteRequest(
            cumulative_product=dmlserve_pb2.CumulativeProduct(input=tensor, axis=axis))
    return dmlserve_pb2.ExecuteRequest(
        cumulative_summation=dmlserve_pb2.CumulativeSummation(input=tensor, axis=axis))


def raw_tensor(data_type, sizes, data):
    return dmlserve_pb2.Tensor(data_type=data_type, sizes=sizes, data=data)


def qmatmul(**overrides):
    """A valid 2x3 by 3x2 request; `overrides` replace or (None) remove fields."""
    fields = dict(
        a=np.ones((1, 1, 2, 3), np.uint8), a_scale=1.0, b=np.ones((1, 1, 3, 2), np.uint8),
        b_scale=1.0, output_scale=1.0, output_dtype="UINT8")
    fields.update(overrides)
    # Fields set to None are built from a placeholder, then cleared from the message.
    removed = [name for name, value in fields.items() if value is None and name != "output_dtype"]
    for name in removed:
        fields[name] = 1.0 if "scale" in name else np.ones((1, 1, 1, 1), np.uint8)
    request = Client.qmatmul_request(**fields)
    for name in removed:
        request.quantized_linear_matrix_multiply.ClearField(name)
    return request


def bad_requests():
    """(name, request, expected code, text the message must contain)."""
    f32 = dmlserve_pb2.FLOAT32
    return [
        ("unknown data type", scan_request(raw_tensor(42, [2], b"\0" * 8)), INVALID,
         "input.data_type"),
        ("missing data type", scan_request(raw_tensor(0, [2], b"\0" * 8)), INVALID,
         "input.data_type"),
        ("unsupported data type for cumsum",
         scan_request(tensor_from_numpy(np.ones(4, np.int8))), INVALID, "input.data_type"),
        ("unsupported data type for cumprod",
         scan_request(tensor_from_numpy(np.ones(4, np.int32)), product=True), INVALID,
         "input.data_type"),
        ("0 dimensions", scan_request(raw_tensor(f32, [], b"\0" * 4)), INVALID, "input.sizes"),
        ("9 dimensions", scan_request(raw_tensor(f32, [1] * 9, b"\0" * 4)), INVALID,
         "input.sizes"),
        ("zero size", scan_request(raw_tensor(f32, [2, 0], b"")), INVALID, "input.sizes[1]"),
        ("overflowing element count",
         scan_request(raw_tensor(f32, [0xFFFFFFFF] * 3, b"\0" * 4)), INVALID, "input.sizes"),
        ("data length mismatch", scan_request(raw_tensor(f32, [2, 3], b"\0" * 20)), INVALID,
         "input.data"),
        ("axis out of range", scan_request(tensor_from_numpy(np.ones((2, 3), np.float32)),
                                           axis=2), INVALID, "axis"),
        ("missing input", dmlserve_pb2.ExecuteRequest(
            cumulative_summation=dmlserve_pb2.CumulativeSummation()), INVALID, "input"),
        ("no operator", dmlserve_pb2.ExecuteRequest(request_id="x"), INVALID, "operator"),
        ("a_scale shape", qmatmul(a_scale=np.ones((1, 1, 2, 2), np.float32)), INVALID,
         "a_scale.sizes"),
        ("b_scale per row instead of per column",
         qmatmul(b_scale=np.ones((1, 1, 3, 1), np.float32)), INVALID, "b_scale.sizes"),
        ("output_scale shape", qmatmul(output_scale=np.ones((1, 1, 1, 5), np.float32)),
         INVALID, "output_scale.sizes"),
        ("scale type", qmatmul(a_scale=tensor_from_numpy(np.ones((1, 1, 1, 1), np.float16))),
         INVALID,
         "a_scale.data_type"),
        ("zero point type", qmatmul(a_zero_point=np.zeros((1, 1, 1, 1), np.int8)), INVALID,
         "a_zero_point.data_type"),
        ("zero point shape", qmatmul(b_zero_point=np.zeros((1, 1, 1, 3), np.uint8)), INVALID,
         "b_zero_point.sizes"),
        ("matrix type", qmatmul(a=np.ones((1, 1, 2, 3), np.int16)), INVALID, "a.data_type"),
        ("A/B inner dimension mismatch", qmatmul(b=np.ones((1, 1, 4, 2), np.uint8)), INVALID,
         "b.sizes"),
        ("missing a", qmatmul(a=None), INVALID, "a"),
        ("missing b", qmatmul(b=None), INVALID, "b"),
        ("missing a_scale", qmatmul(a_scale=None), INVALID, "a_scale"),
        ("missing output_scale", qmatmul(output_scale=None), INVALID, "output_scale"),
        ("missing output type", qmatmul(output_dtype=None), INVALID, "output_data_type"),
        ("unknown tensor_id", scan_request(tensor_ref("no-such-tensor")), INVALID,
         "input.tensor_id"),
        ("unknown tensor_id for b", qmatmul(b=tensor_ref("no-such-weights")), INVALID,
         "b.tensor_id"),
    ]


class BadInputTest(ServerTestCase):
    SERVER_ARGS = (f"--max_request_bytes={MAX_REQUEST_BYTES}",)

    def test_each_bad_request_is_rejected_and_the_server_goes_on(self):
        for name, request, code, field in bad_requests():
            with self.subTest(name):
                with self.assertRaises(DmlserveError) as raised:
                    self.client.execute(request)
                self.assertEqual(raised.exception.code, code, raised.exception.message)
                self.assertIn(field, raised.exception.message)
                self.assert_server_still_answers()

    def test_bad_requests_mid_stream(self):
        good = np.arange(6, dtype=np.float32).reshape(2, 3)
        requests, expected = [], {}
        for i, (name, request, code, field) in enumerate(bad_requests()):
            request.request_id = f"bad-{i}"
            expected[request.request_id] = (code, field)
            requests.append(request)
            ok_id = f"good-{i}"
            requests.append(Client.cumsum_request(good, axis=1, request_id=ok_id))
        results = self.client.stream(requests)
        for request, result in zip(requests, results):
            if request.request_id.startswith("good"):
                self.assertNotIsInstance(result, DmlserveError, request.request_id)
                self.assertEqual(list(result.output.sizes), [2, 3])
                continue
            code, field = expected[request.request_id]
            self.assertIsInstance(result, DmlserveError, request.request_id)
            self.assertEqual(result.code, code, result.message)
            self.assertIn(field, result.message)

    def test_oversized_request_is_resource_exhausted(self):
        big = np.zeros(MAX_REQUEST_BYTES // 4 + 1024, np.float32)
        with self.assertRaises(DmlserveError) as raised:
            self.client.cumsum(big)
        self.assertEqual(raised.exception.code, grpc.StatusCode.RESOURCE_EXHAUSTED,
                         raised.exception.message)
        self.assert_server_still_answers()

    def test_deadline(self):
        # 768 KiB (under this server's 1 MiB limit): sending it alone outlasts
        # the 1 µs deadline many times over, so the answer cannot come back
        # before the deadline fires (with a small tensor a fast server's
        # answer could win that race).
        x = np.ones((192, 1024), np.float32)
        with self.assertRaises(DmlserveError) as raised:
            self.client.cumsum(x, axis=1, timeout=1e-6)
        self.assertEqual(raised.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assert_server_still_answers()
        # With room to finish the same request succeeds.
        np.testing.assert_array_equal(self.client.cumsum(x, axis=1, timeout=120),
                                      np.cumsum(x, axis=1))


if __name__ == "__main__":
    unittest.main()
