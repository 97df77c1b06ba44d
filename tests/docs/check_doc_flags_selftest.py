#!/usr/bin/python3
"""check_doc_flags.py must check a real amount and fail on drift: a wrong default or an unknown
flag in a partial table, a load generator table flag, a flag in a Kubernetes args list, a
systemd ExecStart, a CLI probe, a documented command line, nested --server_args; and must leave
other tools' flags alone. Runs it on the real tree with one file altered through --replace.

Usage: check_doc_flags_selftest.py DMLSERVE_BINARY DMLSERVE_CLI SOURCE_ROOT
"""

import pathlib
import re
import subprocess
import sys
import tempfile

CHECK = pathlib.Path(__file__).with_name("check_doc_flags.py")


def run(binary, cli, root, replacements=()):
    args = [sys.executable, str(CHECK), binary, cli, root]
    for rel, path in replacements:
        args += ["--replace", f"{rel}={path}"]
    return subprocess.run(args, capture_output=True, text=True)


def main():
    binary, cli, root = sys.argv[1:4]
    real = run(binary, cli, root)
    assert real.returncode == 0, f"the real files must pass:\n{real.stdout}{real.stderr}"
    rows, flags = map(int, re.search(r"(\d+) flag table rows and (\d+) flags", real.stdout).groups())
    assert rows >= 50 and flags >= 200, f"checks too little: {real.stdout}"
    print(real.stdout.strip())

    def text(rel):
        return pathlib.Path(root, rel).read_text(encoding="utf-8")

    def altered(rel, old, new):
        original = text(rel)
        assert old in original, f"the self-test's anchor {old!r} is gone from {rel}"
        return original.replace(old, new, 1)

    def line_of(rel, anchor):
        """The 1-based line of `anchor`'s start in `rel` (so edits above it move no test)."""
        return text(rel)[:text(rel).index(anchor)].count("\n") + 1

    drifts = [
        ("a wrong default in a partial table", "docs/d3d12.md",
         altered("docs/d3d12.md", "| `--d3d12_inflight_batches` | `4` |",
                 "| `--d3d12_inflight_batches` | `3` |"),
         "--d3d12_inflight_batches documents default '3', dmlserve's is '4'"),
        ("an unknown flag in a partial table", "docs/d3d12.md",
         altered("docs/d3d12.md", "| `--d3d12_devices_per_adapter` |", "| `--d3d12_devices` |"),
         "--d3d12_devices is not a dmlserve flag"),
        ("an unknown flag in the load generator's table", "docs/benchmarks.md",
         altered("docs/benchmarks.md", "| `--channels`, `--in_flight` |",
                 "| `--channels`, `--inflight` |"),
         "--inflight is not a dmlserve-load flag"),
        ("nested --server_args", "docs/benchmarks.md",
         altered("docs/benchmarks.md", '--server_args="--backend=d3d12 --d3d12_devices_per_adapter=2"',
                 '--server_args="--backend=d3d12 --d3d12_devices=2"'),
         "--d3d12_devices is not a dmlserve flag"),
        ("a Kubernetes args list", "deploy/kubernetes/dmlserve.yaml",
         altered("deploy/kubernetes/dmlserve.yaml", "- --cpu_devices=1", "- --cpu_device=1"),
         "deploy/kubernetes/dmlserve.yaml:33: --cpu_device is not a dmlserve flag"),
        ("a systemd ExecStart", "deploy/systemd/dmlserve.service",
         altered("deploy/systemd/dmlserve.service", "--backend=cpu $DMLSERVE_FLAGS",
                 "--backend=cpu --max_queue_length=5 $DMLSERVE_FLAGS"),
         "--max_queue_length is not a dmlserve flag"),
        ("a CLI probe", "deploy/kubernetes/dmlserve-tls.yaml",
         altered("deploy/kubernetes/dmlserve-tls.yaml", "--deadline_ms=2000", "--deadline=2000"),
         "--deadline is not a dmlserve-cli flag"),
        ("a documented command line", "docs/client.md",
         altered("docs/client.md", "$ dmlserve-cli health\n", "$ dmlserve-cli health --verbose\n"),
         f"docs/client.md:{line_of('docs/client.md', '$ dmlserve-cli health' + chr(10))}: "
         "--verbose is not a dmlserve-cli flag"),
        ("--service_name outside `dmlserve service`", "README.md",
         text("README.md") + "\n```sh\nbuild/server/dmlserve --service_name=x\n```\n",
         "--service_name is not a dmlserve flag"),
    ]
    other_tools = ("\n```sh\ncmake --build build --target dmlserve --parallel 2 && "
                   "build/server/dmlserve --listen=127.0.0.1:0\nkubectl logs --follow dmlserve\n"
                   ".\\dmlserve.exe service install --service_name=gpu0 --backend=d3d12\n```\n")
    with tempfile.TemporaryDirectory() as directory:
        copy = pathlib.Path(directory, "copy")
        copy.write_text(text("README.md") + other_tools, encoding="utf-8")
        result = run(binary, cli, root, [("README.md", copy)])
        assert result.returncode == 0, f"other tools' flags were flagged:\n{result.stdout}"
        for what, rel, altered_text, expected in drifts:
            copy.write_text(altered_text, encoding="utf-8")
            result = run(binary, cli, root, [(rel, copy)])
            assert result.returncode == 1, f"{what} was not caught:\n{result.stdout}{result.stderr}"
            assert expected in result.stdout, f"{what}: no {expected!r} in:\n{result.stdout}"
            print(f"caught {what}: {result.stdout.strip()}")


if __name__ == "__main__":
    main()
