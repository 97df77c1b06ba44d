#!/usr/bin/python3
"""docs/client.md shows `dmlserve-cli info --pretty` against a server with its defaults: the
example must be exactly what the CLI prints today (the CPU's description aside, which names
the machine).

Usage: check_client_info_example.py DMLSERVE_BINARY DMLSERVE_CLI docs/client.md
"""

import pathlib
import re
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
from server_process import ServerProcess  # noqa: E402


def normalized(text):
    return re.sub(r'"description": "[^"]*"', '"description": "<cpu>"', text).strip()


def main():
    binary, cli, doc = sys.argv[1:4]
    text = pathlib.Path(doc).read_text(encoding="utf-8")
    match = re.search(r"\$ dmlserve-cli info --pretty\n(.*?)\n```", text, re.S)
    if not match:
        sys.exit(f"{doc}: no `$ dmlserve-cli info --pretty` example")
    with ServerProcess(binary) as server:
        printed = subprocess.run([cli, f"--server={server.grpc_address}", "info", "--pretty"],
                                 capture_output=True, text=True, check=True).stdout
    if normalized(printed) != normalized(match.group(1)):
        print(f"{doc}: the info example differs from what dmlserve-cli prints:\n{printed}")
        sys.exit(1)
    print("the info example matches dmlserve-cli")


if __name__ == "__main__":
    main()
