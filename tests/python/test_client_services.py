"""Health checking, server reflection and GetServerInfo through the Python client."""

import unittest

import grpc
from google.protobuf import descriptor_pb2

from client_test_support import ServerTestCase
from dmlserve.v1 import dmlserve_pb2
from dmlserve_client import DmlserveError
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc


class ServicesTest(ServerTestCase):
    def test_health(self):
        self.assertEqual(self.client.health(), "SERVING")
        self.assertEqual(self.client.health("dmlserve.v1.OperatorService"), "SERVING")
        with self.assertRaises(DmlserveError) as raised:
            self.client.health("no.such.Service")
        self.assertEqual(raised.exception.code, grpc.StatusCode.NOT_FOUND)

    def reflect(self, stub, **request):
        responses = list(stub.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(**request)]), timeout=60))
        self.assertEqual(len(responses), 1)
        return responses[0]

    def test_reflection_lists_the_services(self):
        with grpc.insecure_channel(self.server.grpc_address) as channel:
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            listed = self.reflect(stub, list_services="")
            names = {service.name for service in listed.list_services_response.service}
            self.assertLessEqual({"dmlserve.v1.OperatorService", "grpc.health.v1.Health",
                                  "grpc.reflection.v1alpha.ServerReflection"}, names)

            found = self.reflect(stub, file_containing_symbol="dmlserve.v1.OperatorService")
            files = [descriptor_pb2.FileDescriptorProto.FromString(raw)
                     for raw in found.file_descriptor_response.file_descriptor_proto]
            services = {(f.package, s.name): [m.name for m in s.method]
                        for f in files for s in f.service}
            self.assertEqual(sorted(services[("dmlserve.v1", "OperatorService")]),
                             sorted(dmlserve_pb2.DESCRIPTOR.services_by_name["OperatorService"]
                                    .methods_by_name))

    def test_server_info(self):
        info = self.client.info()
        self.assertTrue(info.version)
        self.assertTrue(info.devices)
        self.assertTrue(all(device.healthy for device in info.devices))
        supported = {op.name: {dmlserve_pb2.DataType.Name(t) for t in op.data_types}
                     for op in info.operators}
        self.assertEqual(supported["cumulative_summation"],
                         {"FLOAT32", "FLOAT16", "INT64", "INT32", "UINT64", "UINT32"})
        self.assertEqual(supported["cumulative_product"],
                         {"FLOAT32", "FLOAT16", "UINT32", "UINT16"})
        self.assertEqual(supported["quantized_linear_matrix_multiply"], {"INT8", "UINT8"})
        self.assertEqual(info.limits.max_dimensions, 8)


if __name__ == "__main__":
    unittest.main()
