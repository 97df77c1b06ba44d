#!/usr/bin/python3
"""The flag-table check must fail on drift: a flag dropped, a default changed, a flag that
does not exist. Runs check_flag_tables.py on altered copies of the real tables."""

import pathlib
import subprocess
import sys
import tempfile

CHECK = pathlib.Path(__file__).with_name("check_flag_tables.py")


def run(binary, readme, api):
    return subprocess.run([sys.executable, str(CHECK), binary, readme, api],
                          capture_output=True, text=True)


def main():
    binary, readme, api = sys.argv[1:4]
    assert run(binary, readme, api).returncode == 0, "the real tables must pass"
    api_text = pathlib.Path(api).read_text(encoding="utf-8")
    readme_text = pathlib.Path(readme).read_text(encoding="utf-8")
    drifts = {
        "a dropped flag": (readme_text, "\n".join(
            line for line in api_text.splitlines() if not line.startswith("| `--max_queue` "))),
        "a changed default": (readme_text.replace("| `--max_queue` | `1024` |",
                                                  "| `--max_queue` | `512` |"), api_text),
        "an unknown flag": (readme_text, api_text.replace(
            "| `--max_queue` |", "| `--max_queue`, `--max_queue_length` |")),
    }
    with tempfile.TemporaryDirectory() as directory:
        for what, (readme_copy, api_copy) in drifts.items():
            readme_path = pathlib.Path(directory, "README.md")
            api_path = pathlib.Path(directory, "api.md")
            readme_path.write_text(readme_copy, encoding="utf-8")
            api_path.write_text(api_copy, encoding="utf-8")
            result = run(binary, str(readme_path), str(api_path))
            assert result.returncode != 0, f"{what} was not caught"
            assert "--max_queue" in result.stdout, f"{what}: {result.stdout}"
            print(f"caught {what}: {result.stdout.strip()}")


if __name__ == "__main__":
    main()
