"""Every operator through the Python client: all conformance cases exactly, then random
cases of every supported data type against numpy references."""

import unittest

import numpy as np

from client_test_support import (ServerTestCase, conformance_cases, friendly_tensor,
                                 reference_qmatmul, reference_scan, request_from_case,
                                 scan_magnitude)
from dmlserve.v1 import dmlserve_pb2
from dmlserve_client import (data_type_of, numpy_from_tensor, tensor_from_numpy)

SUM_TYPES = [np.float32, np.float16, np.int64, np.int32, np.uint64, np.uint32]
PRODUCT_TYPES = [np.float32, np.float16, np.uint32, np.uint16]


class TensorHelpersTest(unittest.TestCase):
    def test_round_trip_every_type(self):
        for dtype in [np.float32, np.float16, np.float64, np.uint8, np.uint16, np.uint32,
                      np.uint64, np.int8, np.int16, np.int32, np.int64]:
            with self.subTest(dtype=np.dtype(dtype).name):
                info = np.finfo(dtype) if np.dtype(dtype).kind == "f" else np.iinfo(dtype)
                array = np.array([[info.min, 0, 1], [2, 3, info.max]], dtype=dtype)
                tensor = tensor_from_numpy(array)
                self.assertEqual(dmlserve_pb2.DataType.Name(tensor.data_type),
                                 np.dtype(dtype).name.upper())
                self.assertEqual(list(tensor.sizes), [2, 3])
                self.assertEqual(tensor.data, array.astype(np.dtype(dtype).newbyteorder("<"))
                                 .tobytes())
                back = numpy_from_tensor(tensor)
                self.assertEqual(back.dtype, np.dtype(dtype))
                np.testing.assert_array_equal(back, array)

    def test_big_endian_input_is_packed_little_endian(self):
        array = np.array([1, 256], dtype=">u2")
        self.assertEqual(tensor_from_numpy(array).data, b"\x01\x00\x00\x01")
        self.assertEqual(data_type_of(array.dtype), dmlserve_pb2.UINT16)

    def test_float16_conversion(self):
        tensor = tensor_from_numpy([1.0, -2.5, 0.1, 65520.0], "FLOAT16")
        self.assertEqual(tensor.data_type, dmlserve_pb2.FLOAT16)
        self.assertEqual(tensor.data[:6], b"\x00\x3c\x00\xc1\x66\x2e")
        self.assertTrue(np.isinf(numpy_from_tensor(tensor)[3]))

    def test_short_data_is_an_error(self):
        tensor = tensor_from_numpy(np.zeros(3, np.int32))
        tensor.sizes[0] = 4
        with self.assertRaisesRegex(ValueError, "4 elements"):
            numpy_from_tensor(tensor)


class OperatorsTest(ServerTestCase):
    def test_every_conformance_case(self):
        cases = conformance_cases()
        self.assertGreaterEqual(len(cases), 13)
        for case in cases:
            with self.subTest(case=case["name"]):
                response = self.client.execute(request_from_case(case))
                self.assertEqual(response.request_id, case["name"])
                expected = friendly_tensor(case["expected"])
                output = numpy_from_tensor(response.output)
                self.assertEqual(output.dtype, expected.dtype)
                np.testing.assert_array_equal(output, expected)

    def check_scan(self, rng, dtype, product):
        rank = int(rng.integers(1, 6))
        shape = tuple(int(s) for s in rng.integers(1, 7, size=rank))
        if np.dtype(dtype).kind == "f":
            low, high = (0.5, 1.5) if product else (-10, 10)
            x = rng.uniform(low, high, size=shape).astype(dtype)
        else:
            info = np.iinfo(dtype)
            if product:
                x = rng.integers(0, 9, size=shape).astype(dtype)
            else:
                x = rng.integers(max(info.min, -1000), 1000, size=shape).astype(dtype)
            # Extremes so that wrapping happens.
            x.flat[0] = info.max
            x.flat[-1] = info.max - 3
        axis = int(rng.integers(0, rank))
        reverse, exclusive = bool(rng.integers(0, 2)), bool(rng.integers(0, 2))
        call = self.client.cumprod if product else self.client.cumsum
        got = call(x, axis=axis, reverse=reverse, exclusive=exclusive)
        self.assertEqual(got.dtype, np.dtype(dtype))
        self.assertEqual(got.shape, shape)
        want = reference_scan(x, axis, reverse, exclusive, product)
        context = f"{np.dtype(dtype).name} shape={shape} axis={axis} reverse={reverse} " \
                  f"exclusive={exclusive} product={product}"
        if np.dtype(dtype).kind in "iu":
            np.testing.assert_array_equal(got, want, err_msg=context)
            return
        magnitude = scan_magnitude(x, axis, reverse, exclusive, product)
        length = shape[axis]
        if dtype == np.float16:
            tolerance = magnitude * (2.0 ** -10) + 1e-6
        else:
            tolerance = magnitude * (4 * length * np.finfo(np.float32).eps) + 1e-30
        error = np.abs(got.astype(np.float64) - want)
        self.assertTrue(np.all(error <= tolerance),
                        f"{context}: max error {error.max()}\n got {got}\n want {want}")

    def test_random_scans_of_every_type(self):
        rng = np.random.default_rng(1234)
        for product, types in ((False, SUM_TYPES), (True, PRODUCT_TYPES)):
            for dtype in types:
                for _ in range(6):
                    with self.subTest(dtype=np.dtype(dtype).name, product=product):
                        self.check_scan(rng, dtype, product)

    def test_long_float_scan_within_tolerance(self):
        rng = np.random.default_rng(7)
        x = rng.uniform(-1, 1, size=(3, 20000)).astype(np.float32)
        got = self.client.cumsum(x, axis=1)
        want = reference_scan(x, 1, False, False, False)
        magnitude = scan_magnitude(x, 1, False, False, False)
        self.assertTrue(np.all(np.abs(got - want) <= magnitude * 1e-4))

    def test_random_qmatmul(self):
        rng = np.random.default_rng(99)
        for trial in range(24):
            a_type = [np.uint8, np.int8][trial % 2]
            b_type = [np.uint8, np.int8][(trial // 2) % 2]
            out_type = [np.uint8, np.int8][(trial // 4) % 2]
            m, k, n = (int(v) for v in rng.integers(1, 9, size=3))
            batch_a, batch_b = [(1, 1), (2, 2), (3, 1), (1, 2)][trial % 4]
            a = rng.integers(np.iinfo(a_type).min, np.iinfo(a_type).max + 1,
                             size=(batch_a, 1, m, k)).astype(a_type)
            b = rng.integers(np.iinfo(b_type).min, np.iinfo(b_type).max + 1,
                             size=(batch_b, 1, k, n)).astype(b_type)
            per_row = trial % 3 == 0
            # Power-of-two scales half the time (exact), arbitrary ones otherwise.
            if trial % 2 == 0:
                pick = lambda size: np.float32(2.0) ** rng.integers(-6, 3, size=size)
            else:
                pick = lambda size: rng.uniform(0.01, 2.0, size=size)
            a_scale = pick((1, 1, m, 1) if per_row else (1, 1, 1, 1)).astype(np.float32)
            b_scale = pick((1, 1, 1, n) if per_row else (1, 1, 1, 1)).astype(np.float32)
            output_scale = (pick((1, 1, 1, 1)) * 16).astype(np.float32)
            a_zp = rng.integers(-5, 6, size=a_scale.shape).astype(a_type) if trial % 5 else None
            if a_zp is not None and a_type == np.uint8:
                a_zp = (a_zp.astype(np.int64) + 128).astype(np.uint8)
            b_zp = None
            out_zp = np.full((1, 1, 1, 1), 3, dtype=out_type) if trial % 3 == 1 else None
            got = self.client.qmatmul(a, a_scale, b, b_scale, output_scale, a_zero_point=a_zp,
                                      b_zero_point=b_zp, output_zero_point=out_zp,
                                      output_dtype=None if out_zp is not None
                                      else np.dtype(out_type).name.upper())
            want, ties = reference_qmatmul(a, a_scale, b, b_scale, output_scale, out_type,
                                           a_zp, b_zp, out_zp)
            self.assertEqual(got.dtype, np.dtype(out_type))
            self.assertEqual(got.shape, want.shape)
            difference = np.abs(got.astype(np.int64) - want.astype(np.int64))
            ok = (difference == 0) | (ties & (difference <= 1))
            self.assertTrue(np.all(ok), f"trial {trial}\n got {got}\n want {want}")

    def test_float16_input_helpers(self):
        x = np.array([[0.5, 2.0, -1.5, 4.0]], dtype=np.float16)
        np.testing.assert_array_equal(self.client.cumprod(x, axis=1),
                                      np.array([[0.5, 1.0, -1.5, -6.0]], dtype=np.float16))
        np.testing.assert_array_equal(
            self.client.cumsum(x, axis=1, reverse=True, exclusive=True),
            np.array([[4.5, 2.5, 4.0, 0.0]], dtype=np.float16))


if __name__ == "__main__":
    unittest.main()
