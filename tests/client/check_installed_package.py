#!/usr/bin/python3
"""`cmake --install` dmlserve into a scratch prefix, then build the shipped C++ example as a
separate project with find_package(dmlserve) from that prefix, and run it against a real
server: what a user of the installed client library does.

Usage: check_installed_package.py BUILD_DIR CONSUMER_SOURCE_DIR DMLSERVE_BINARY
"""

import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
from server_process import ServerProcess  # noqa: E402


def build_step(command):
    """Runs a build step; on failure prints what it printed (compiler errors included)."""
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed with exit code {result.returncode}:\n"
                 f"{result.stdout}")


def main():
    build, consumer, binary = sys.argv[1:4]
    # Inside the build tree, like every other build output (not /tmp, whose mount options
    # and size differ between machines).
    with tempfile.TemporaryDirectory(dir=build, prefix="installed-package-") as scratch:
        prefix = pathlib.Path(scratch, "prefix")
        build_step(["cmake", "--install", build, "--prefix", str(prefix)])
        example = prefix / "share/doc/dmlserve/examples/client_example.cc"
        consumer_build = pathlib.Path(scratch, "consumer")
        build_step(["cmake", "-S", consumer, "-B", str(consumer_build), "-G", "Ninja",
             f"-DCMAKE_PREFIX_PATH={prefix}", f"-DDMLSERVE_EXAMPLE_SOURCE={example}",
             "-DCMAKE_BUILD_TYPE=Release"])
        build_step(["cmake", "--build", str(consumer_build), "--verbose"])
        with ServerProcess(binary) as server:
            run = subprocess.run([str(consumer_build / "client_example"), server.grpc_address],
                                 capture_output=True, text=True, timeout=120)
        if run.returncode != 0:
            sys.exit(f"the example built against the installed package failed:\n"
                     f"{run.stdout}\n{run.stderr}")
    print("built with find_package(dmlserve) from an installed prefix; the example ran")


if __name__ == "__main__":
    main()
