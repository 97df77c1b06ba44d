#!/usr/bin/python3
"""pip install ./client/python into a fresh virtual environment, offline (Debian's setuptools,
--no-build-isolation --no-index), then use the installed package with nothing from this
repository on sys.path: numpy in and out against a real server, errors, typing.

Usage: check_installed_package.py REPOSITORY_ROOT DMLSERVE_BINARY
"""

import os
import pathlib
import subprocess
import sys
import tempfile

from server_process import ServerProcess

USE = r'''
import pathlib, sys, typing
import numpy as np
import grpc
import dmlserve_client
from dmlserve_client import Client, DmlserveError, tensor_ref
from dmlserve_client import _stubs

venv = pathlib.Path(sys.prefix)
for module in (dmlserve_client, _stubs.dmlserve_pb2, _stubs.health_pb2):
    assert venv in pathlib.Path(module.__file__).parents, f"{module.__name__} from {module.__file__}"
assert _stubs.dmlserve_pb2.__name__.startswith("dmlserve_client._proto."), _stubs.dmlserve_pb2
assert (pathlib.Path(dmlserve_client.__file__).parent / "py.typed").exists()
hints = typing.get_type_hints(Client.qmatmul)
assert hints["return"] is np.ndarray and "output_dtype" in hints, hints

with Client(sys.argv[1], timeout=60) as client:
    assert client.health() == "SERVING"
    x = np.arange(1, 13, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(client.cumsum(x, axis=1), np.cumsum(x, axis=1))
    np.testing.assert_array_equal(client.cumprod(x.astype(np.uint32), axis=0),
                                  np.cumprod(x.astype(np.uint32), axis=0))
    b = np.arange(24, dtype=np.uint8).reshape(4, 6)
    b_id = client.register(b, "installed-b")
    a = np.array([[1, 2, 3, 4]], dtype=np.uint8)
    got = client.qmatmul(a, 1.0, tensor_ref(b_id), 1.0, 4.0, output_dtype="UINT8")
    want = np.clip(np.round((a.astype(np.int64) @ b.astype(np.int64)) / 4.0), 0, 255)
    np.testing.assert_array_equal(got, want.astype(np.uint8))
    client.release(b_id)
    try:
        client.cumsum(x, axis=5)
        raise AssertionError("axis 5 of a 2-D input was accepted")
    except DmlserveError as error:
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT and "axis" in error.message, error
print("installed package OK")
'''


def main():
    root, binary = sys.argv[1:3]
    with tempfile.TemporaryDirectory() as scratch:
        venv = pathlib.Path(scratch, "venv")
        # System site packages: grpcio, protobuf, numpy and setuptools come from Debian.
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                       check=True)
        python = venv / "bin" / "python"
        environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        # A copy of the package's directory: the build writes build/ and *.egg-info next
        # to the sources, which must not dirty the repository.
        package = pathlib.Path(scratch, "client_python")
        subprocess.run(["cp", "-r", str(pathlib.Path(root, "client/python")), str(package)],
                       check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--no-build-isolation",
                        "--no-index", "--quiet", str(package)], check=True, env={
                            **environment, "DMLSERVE_PROTO_DIR": str(pathlib.Path(root, "proto"))})
        with ServerProcess(binary) as server:
            subprocess.run([str(python), "-c", USE, server.grpc_address], check=True,
                           env=environment, cwd=scratch)
    print("pip install ./client/python works offline in a fresh venv")


if __name__ == "__main__":
    main()
