#!/usr/bin/python3
"""The native API's proto names a package for every language clients generate code in
(Go's import path and C#'s namespace among them), so generated code lands where each
ecosystem expects without per-user flags.

Usage: check_proto_options.py PROTOC PROTO_DIR
"""

import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2

WANTED = ("go_package", "csharp_namespace", "java_package", "objc_class_prefix",
          "php_namespace")


def main():
    protoc, proto_dir = sys.argv[1:3]
    with tempfile.NamedTemporaryFile() as out:
        subprocess.run([protoc, f"-I{proto_dir}", f"--descriptor_set_out={out.name}",
                        "dmlserve/v1/dmlserve.proto"], check=True)
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read()).file
    options = files[-1].options
    missing = [name for name in WANTED if not options.HasField(name)]
    if missing:
        sys.exit(f"dmlserve/v1/dmlserve.proto lacks option {', '.join(missing)}")
    if not options.go_package.endswith(";dmlservev1"):
        sys.exit(f"go_package {options.go_package!r} should name the Go package (;dmlservev1)")
    print(", ".join(f"{name}={getattr(options, name)!r}" for name in WANTED))


if __name__ == "__main__":
    main()
