"""Builds dmlserve-client; metadata is in pyproject.toml.

The package's gRPC stubs are generated when it is built, from the repository's proto/ (the
native API and google/rpc/status.proto) and grpc.health.v1 (Debian's grpc-proto package, or a
proto/ directory next to this file), into dmlserve_client/_proto. Their imports are rewritten
into that package, so an installed client never clashes with another distribution's
`dmlserve` or `grpc_health` modules.
"""

import os
import pathlib
import re
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
# Where each .proto may be: $DMLSERVE_PROTO_DIR (a copy of the repository's proto/ when this
# directory is built elsewhere), a proto/ directory next to this file, the repository.
API_ROOTS = [pathlib.Path(os.environ.get("DMLSERVE_PROTO_DIR", HERE / "proto")), HERE / "proto",
             HERE.parent.parent / "proto"]
HEALTH_ROOTS = [HERE / "proto", pathlib.Path("/usr/share/grpc-proto")]
REWRITTEN = re.compile(r"^(from|import) (dmlserve\.v1|google\.rpc|grpc_health\.v1)\b", re.M)


def find(relative, roots):
    for root in roots:
        if (root / relative).exists():
            return root / relative
    raise FileNotFoundError(f"{relative} not found in {', '.join(map(str, roots))}")


def run_protoc(arguments):
    """The system's protoc with gRPC's Python plugin when both are installed (Debian:
    protobuf-compiler, protobuf-compiler-grpc: the generator the CMake build uses), else
    grpcio-tools' bundled one."""
    protoc = shutil.which("protoc")
    plugin = shutil.which("grpc_python_plugin")
    if protoc and plugin:
        subprocess.run([protoc, f"--plugin=protoc-gen-grpc_python={plugin}", *arguments],
                       check=True)
        return
    import grpc_tools  # pylint: disable=import-outside-toplevel
    from grpc_tools import protoc as bundled  # pylint: disable=import-outside-toplevel
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    if bundled.main(["grpc_tools.protoc", f"-I{well_known}", *arguments]) != 0:
        raise RuntimeError("protoc (grpcio-tools) failed")


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        self.generate(pathlib.Path(self.build_lib) / "dmlserve_client" / "_proto")

    @staticmethod
    def generate(out):
        with tempfile.TemporaryDirectory() as scratch:
            tree = pathlib.Path(scratch)
            sources = {
                "dmlserve/v1/dmlserve.proto": find("dmlserve/v1/dmlserve.proto", API_ROOTS),
                "google/rpc/status.proto": find("google/rpc/status.proto", API_ROOTS),
                # Under grpc_health/ (PyPI grpcio-health-checking's layout), so that the
                # generated module is not mistaken for part of the grpc package.
                "grpc_health/v1/health.proto": find("grpc/health/v1/health.proto",
                                                    HEALTH_ROOTS),
            }
            for relative, source in sources.items():
                (tree / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(source, tree / relative)
            out.mkdir(parents=True, exist_ok=True)
            run_protoc([f"-I{tree}", f"--python_out={out}", f"--grpc_python_out={out}",
                        *sources])
        for generated in out.rglob("*.py"):
            text = generated.read_text(encoding="utf-8")
            generated.write_text(REWRITTEN.sub(r"\1 dmlserve_client._proto.\2", text),
                                 encoding="utf-8")
        for directory in [out, *[d for d in out.rglob("*") if d.is_dir()]]:
            (directory / "__init__.py").touch()


setup(cmdclass={"build_py": BuildWithStubs})
