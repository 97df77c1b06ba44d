#!/usr/bin/python3
"""The path check must look at many paths and links and fail on a missing file, a broken link
or anchor, while leaving install paths, build outputs, URLs and Windows paths alone. Runs
check_doc_paths.py on the real tree with README.md (or a deploy file) replaced by altered
copies.

Usage: check_doc_paths_selftest.py SOURCE_ROOT
"""

import pathlib
import re
import subprocess
import sys
import tempfile

CHECK = pathlib.Path(__file__).with_name("check_doc_paths.py")


def run(root, replacements=()):
    args = [sys.executable, str(CHECK), root]
    for rel, path in replacements:
        args += ["--replace", f"{rel}={path}"]
    return subprocess.run(args, capture_output=True, text=True)


def main():
    root = sys.argv[1]
    real = run(root)
    assert real.returncode == 0, f"the real documents must pass:\n{real.stdout}{real.stderr}"
    counts = re.search(r"(\d+) repository paths and (\d+) links", real.stdout)
    assert counts, real.stdout
    paths, links = map(int, counts.groups())
    assert paths >= 150 and links >= 40, f"checks too little: {real.stdout}"
    print(real.stdout.strip())

    readme = pathlib.Path(root, "README.md").read_text(encoding="utf-8")
    unit = pathlib.Path(root, "deploy/systemd/dmlserve.service").read_text(encoding="utf-8")
    not_paths = ("\n`build/server/no_such_binary` `build-windows/x.exe` `/usr/local/bin/nothing` "
                 "`C:\\dmlserve\\nothing` `https://example.com/tests/nothing` `tests/<suite>/` "
                 "`server/response_encoder` [metrics](docs/metrics.md#example-promql)\n")
    line = readme.count("\n") + 3
    drifts = {
        "a missing file": ("README.md", readme + "\n\nSee `kernels/cpu/no_such_kernel.cc`.\n",
                           f"README.md:{line}: `kernels/cpu/no_such_kernel.cc`"),
        "a missing script in a code block": (
            "README.md", readme + "\n\n```sh\nscripts/no_such_script.sh --x\n```\n",
            "no scripts/no_such_script.sh"),
        "a broken link": ("README.md", readme + "\n\n[gone](docs/no_such_doc.md)\n",
                          "no docs/no_such_doc.md"),
        "a broken anchor": ("README.md", readme + "\n\n[gone](docs/metrics.md#no-such-heading)\n",
                            "docs/metrics.md has no heading with anchor #no-such-heading"),
        "a missing path in a deploy file": (
            "deploy/systemd/dmlserve.service", unit + "# See docs/no_such_doc.md\n",
            "deploy/systemd/dmlserve.service:"),
    }
    with tempfile.TemporaryDirectory() as directory:
        copy = pathlib.Path(directory, "copy")
        copy.write_text(readme + not_paths, encoding="utf-8")
        result = run(root, [("README.md", copy)])
        assert result.returncode == 0, f"non-paths were flagged:\n{result.stdout}"
        for what, (rel, text, expected) in drifts.items():
            copy.write_text(text, encoding="utf-8")
            result = run(root, [(rel, copy)])
            assert result.returncode != 0, f"{what} was not caught"
            assert expected in result.stdout, f"{what}: {result.stdout}"
            print(f"caught {what}: {result.stdout.strip()}")


if __name__ == "__main__":
    main()
