"""Registered weights: one RegisterTensor, several requests by tensor_id, release, then the
unknown id is an error naming it."""

import unittest

import grpc
import numpy as np

from client_test_support import ServerTestCase, reference_qmatmul, reference_scan
from dmlserve_client import DmlserveError, tensor_ref


class RegisteredTensorTest(ServerTestCase):
    def test_weights_serve_many_requests_until_released(self):
        rng = np.random.default_rng(11)
        k, n = 16, 8
        weights = rng.integers(0, 256, size=(1, 1, k, n)).astype(np.uint8)
        tensor_id = self.client.register(weights, "py-weights")
        self.assertEqual(tensor_id, "py-weights")
        self.assertGreaterEqual(self.client.info().registered_tensor_bytes, weights.nbytes)

        b_zp = np.full((1, 1, 1, 1), 128, dtype=np.uint8)
        for m in (1, 3, 5):
            a = rng.integers(-128, 128, size=(1, 1, m, k)).astype(np.int8)
            got = self.client.qmatmul(a, 0.5, tensor_ref(tensor_id), 0.25, 8.0,
                                      b_zero_point=b_zp, output_dtype="INT8")
            want, _ = reference_qmatmul(a, np.float32(0.5).reshape(1, 1, 1, 1), weights,
                                        np.float32(0.25).reshape(1, 1, 1, 1),
                                        np.float32(8.0).reshape(1, 1, 1, 1), np.int8,
                                        b_zero_point=b_zp)
            np.testing.assert_array_equal(got, want)

        # A registered scan input too, with a server-generated id.
        values = np.arange(1, 11, dtype=np.uint32)
        generated = self.client.register(values)
        self.assertTrue(generated)
        np.testing.assert_array_equal(self.client.cumsum(tensor_ref(generated)),
                                      reference_scan(values, 0, False, False, False))
        self.client.release(generated)

        self.client.release(tensor_id)
        with self.assertRaises(DmlserveError) as raised:
            self.client.qmatmul(np.zeros((1, 1, 1, k), np.int8), 0.5, tensor_ref(tensor_id),
                                0.25, 8.0, b_zero_point=b_zp, output_dtype="INT8")
        self.assertEqual(raised.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("b.tensor_id", raised.exception.message)
        self.assertIn(tensor_id, raised.exception.message)
        with self.assertRaises(DmlserveError) as raised:
            self.client.release(tensor_id)
        self.assertEqual(raised.exception.code, grpc.StatusCode.NOT_FOUND)
        self.assert_server_still_answers()

    def test_duplicate_id_is_rejected(self):
        self.client.register(np.zeros(4, np.float32), "py-dup")
        try:
            with self.assertRaises(DmlserveError) as raised:
                self.client.register(np.zeros(4, np.float32), "py-dup")
            self.assertEqual(raised.exception.code, grpc.StatusCode.ALREADY_EXISTS)
        finally:
            self.client.release("py-dup")


if __name__ == "__main__":
    unittest.main()
