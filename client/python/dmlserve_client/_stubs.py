"""The generated protobuf and gRPC modules the client uses.

An installed package (pip install ./client/python) carries its own copies under
dmlserve_client._proto, generated when the package is built, with their imports rewritten
into that package so that they never clash with another distribution's `dmlserve` or
`grpc_health` modules. In this repository's tree, with the build's stubs on PYTHONPATH
(build/proto/python and build/client/python), those are used instead.
"""

try:
    from dmlserve_client._proto.dmlserve.v1 import dmlserve_pb2
    from dmlserve_client._proto.dmlserve.v1 import dmlserve_pb2_grpc
    from dmlserve_client._proto.grpc_health.v1 import health_pb2
    from dmlserve_client._proto.grpc_health.v1 import health_pb2_grpc
except ImportError:
    from dmlserve.v1 import dmlserve_pb2
    from dmlserve.v1 import dmlserve_pb2_grpc
    from grpc_health.v1 import health_pb2
    from grpc_health.v1 import health_pb2_grpc

__all__ = ["dmlserve_pb2", "dmlserve_pb2_grpc", "health_pb2", "health_pb2_grpc"]
