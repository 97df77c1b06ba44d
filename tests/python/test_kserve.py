"""The KServe v2 protocol from Python, with stubs generated from the protocol's proto only
(inference.GRPCInferenceService): a client that knows nothing of dmlserve runs all three
operators, raw and typed, with weights registered once and named by tensor_id."""

import unittest

import grpc
import numpy as np

from client_test_support import ServerTestCase, reference_qmatmul, reference_scan
from inference import grpc_predict_v2_pb2 as pb
from inference import grpc_predict_v2_pb2_grpc as rpc

DATATYPES = {np.dtype(np.float32): "FP32", np.dtype(np.float64): "FP64",
             np.dtype(np.uint8): "UINT8", np.dtype(np.int8): "INT8",
             np.dtype(np.uint32): "UINT32", np.dtype(np.int32): "INT32",
             np.dtype(np.int64): "INT64", np.dtype(np.float16): "FP16"}
TYPED_FIELD = {"FP32": "fp32_contents", "FP64": "fp64_contents", "UINT8": "uint_contents",
               "UINT32": "uint_contents", "INT8": "int_contents", "INT32": "int_contents",
               "INT64": "int64_contents"}
NUMPY = {name: dtype for dtype, name in DATATYPES.items()}


def infer_request(model, inputs, raw, parameters=None):
    """inputs: [(name, numpy array | registered tensor id)]."""
    request = pb.ModelInferRequest(model_name=model, id=f"{model}-py")
    for name, value in inputs:
        tensor = request.inputs.add(name=name)
        if isinstance(value, str):
            tensor.parameters["tensor_id"].string_param = value
            if raw:
                request.raw_input_contents.append(b"")
            continue
        tensor.datatype = DATATYPES[value.dtype]
        tensor.shape.extend(value.shape)
        if raw:
            request.raw_input_contents.append(value.tobytes())
        else:
            getattr(tensor.contents, TYPED_FIELD[tensor.datatype]).extend(value.ravel().tolist())
    for key, value in (parameters or {}).items():
        if isinstance(value, bool):
            request.parameters[key].bool_param = value
        elif isinstance(value, int):
            request.parameters[key].int64_param = value
        else:
            request.parameters[key].string_param = value
    return request


def output_of(response):
    assert len(response.outputs) == 1 and len(response.raw_output_contents) == 1
    output = response.outputs[0]
    assert output.name == "output"
    return np.frombuffer(response.raw_output_contents[0],
                         dtype=NUMPY[output.datatype]).reshape(tuple(output.shape))


class KServeTest(ServerTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.channel = grpc.insecure_channel(cls.server.grpc_address)
        cls.kserve = rpc.GRPCInferenceServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        super().tearDownClass()

    def test_health_and_metadata(self):
        self.assertTrue(self.kserve.ServerLive(pb.ServerLiveRequest()).live)
        self.assertTrue(self.kserve.ServerReady(pb.ServerReadyRequest()).ready)
        self.assertEqual(self.kserve.ServerMetadata(pb.ServerMetadataRequest()).name, "dmlserve")
        metadata = self.kserve.ModelMetadata(
            pb.ModelMetadataRequest(name="quantized_linear_matrix_multiply"))
        self.assertEqual([i.name for i in metadata.inputs],
                         ["a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point",
                          "output_scale", "output_zero_point"])
        with self.assertRaises(grpc.RpcError) as raised:
            self.kserve.ModelReady(pb.ModelReadyRequest(name="bert"))
        self.assertEqual(raised.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_scans_raw_and_typed(self):
        rng = np.random.default_rng(5)
        for dtype in (np.float32, np.int32, np.uint32):
            x = rng.integers(1, 5, size=(3, 4, 5)).astype(dtype)
            for raw in (True, False):
                for model, product in (("cumulative_summation", False),
                                       ("cumulative_product", True)):
                    if product and dtype == np.int32:
                        continue  # cumulative_product takes no INT32 (DirectML's rule)
                    with self.subTest(dtype=dtype, raw=raw, model=model):
                        parameters = {"axis": 2, "axis_direction": "DECREASING",
                                      "exclusive": True}
                        got = output_of(self.kserve.ModelInfer(
                            infer_request(model, [("input", x)], raw, parameters)))
                        want = reference_scan(x, 2, True, True, product)
                        self.assertEqual(got.dtype, x.dtype)
                        if dtype == np.float32:
                            np.testing.assert_allclose(got, want, rtol=1e-5)
                        else:
                            np.testing.assert_array_equal(got, want)

    def test_matrix_multiply_with_registered_weights(self):
        rng = np.random.default_rng(9)
        k, n = 32, 12
        b = rng.integers(0, 256, size=(k, n)).astype(np.uint8)
        b_scale = rng.uniform(0.01, 0.05, size=(1, n)).astype(np.float32)
        b_id = self.client.register(b, "kserve-py-b")
        scale_id = self.client.register(b_scale, "kserve-py-b-scale")
        try:
            for raw in (True, False):
                a = rng.integers(-128, 128, size=(3, k)).astype(np.int8)
                inputs = [("a", a), ("a_scale", np.float32([0.5])),
                          ("b", b_id), ("b_scale", scale_id),
                          ("b_zero_point", np.uint8([128])), ("output_scale", np.float32([4.0]))]
                with self.subTest(raw=raw):
                    got = output_of(self.kserve.ModelInfer(infer_request(
                        "quantized_linear_matrix_multiply", inputs, raw,
                        {"output_data_type": "INT8"})))
                    want, ties = reference_qmatmul(
                        a, np.float32(0.5).reshape(1, 1), b, b_scale,
                        np.float32(4.0).reshape(1, 1), np.int8,
                        b_zero_point=np.uint8(128).reshape(1, 1))
                    self.assertEqual(got.shape, want.shape)
                    difference = np.abs(got.astype(np.int32) - want.astype(np.int32))
                    # Exact, but for the spec's +-1 at near-ties of the requantization.
                    self.assertTrue(np.all(difference[~ties] == 0))
                    self.assertTrue(np.all(difference <= 1))
        finally:
            self.client.release(b_id)
            self.client.release(scale_id)

    def test_errors_name_the_field(self):
        x = np.arange(6, dtype=np.int32).reshape(2, 3)
        request = infer_request("cumulative_summation", [("input", x)], raw=False,
                                parameters={"axis": 5})
        with self.assertRaises(grpc.RpcError) as raised:
            self.kserve.ModelInfer(request)
        self.assertEqual(raised.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("axis", raised.exception.details())
        request = infer_request("cumulative_summation", [("values", x)], raw=True)
        with self.assertRaises(grpc.RpcError) as raised:
            self.kserve.ModelInfer(request)
        self.assertTrue(raised.exception.details().startswith('inputs[0] ("values")'),
                        raised.exception.details())
        self.assert_server_still_answers()


if __name__ == "__main__":
    unittest.main()
