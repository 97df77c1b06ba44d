#!/usr/bin/python3
"""Installs the build into a scratch prefix (as `cmake --install build --prefix /usr/local`
would) and checks that what the systemd unit names is there: ExecStart's binary and the
Documentation= file, both under the prefix the unit assumes (/usr/local)."""

import os
import pathlib
import re
import subprocess
import sys
import tempfile


def main():
    build, unit = sys.argv[1:3]
    text = pathlib.Path(unit).read_text(encoding="utf-8")
    documentation = re.search(r"^Documentation=file://(\S+)", text, re.M).group(1)
    exec_start = re.search(r"^ExecStart=(\S+)", text, re.M).group(1)
    with tempfile.TemporaryDirectory() as root:
        prefix = pathlib.Path(root, "usr/local")
        subprocess.run(["cmake", "--install", build, "--prefix", str(prefix)], check=True,
                       stdout=subprocess.DEVNULL)
        for path in (documentation, exec_start, "/usr/local/bin/dmlserve-cli",
                     "/usr/local/share/doc/dmlserve/docs/kserve.md",
                     "/usr/local/share/dmlserve/deploy/systemd/dmlserve.service"):
            installed = pathlib.Path(root, path.lstrip("/"))
            assert installed.exists(), f"{path} is not installed (looked for {installed})"
        binary = pathlib.Path(root, exec_start.lstrip("/"))
        assert os.access(binary, os.X_OK), f"{exec_start} is not executable"
        assert subprocess.run([str(binary), "--version"], capture_output=True).returncode == 0
    print(f"installed: {exec_start}, {documentation} and the deploy files")


if __name__ == "__main__":
    main()
