#!/usr/bin/python3
"""Fails when a documented server flag table drifts from the server's own --helpfull.

Usage: check_flag_tables.py DMLSERVE_BINARY README.md docs/api.md

Every flag the server defines (server/server_flags.cc) must be in each table with the default
--helpfull prints, and every flag a table lists must exist. Flags whose help starts with
"Testing only" may be left out of the README (docs/api.md lists them all).
"""

import re
import subprocess
import sys

EMPTY_WORDS = {"empty", "all", "none"}


def server_flags(binary):
    """{name: (default, help)} of the flags defined in server_flags.cc."""
    text = subprocess.run([binary, "--helpfull"], capture_output=True, text=True).stdout
    text += subprocess.run([binary, "--helpfull"], capture_output=True, text=True).stderr
    section = re.search(r"Flags from \S*server/server_flags\.cc:\n(.*?)(?:\n  Flags from|\n\nTry)",
                        text, re.S)
    if not section:
        sys.exit("no 'Flags from .../server/server_flags.cc' section in --helpfull")
    flags = {}
    for match in re.finditer(r"--(\w+) \((.*?)\);\s+default: (.*?);", section.group(1), re.S):
        name, help_text, default = match.groups()
        default = default.strip()
        if default.startswith('"') and default.endswith('"'):
            default = default[1:-1]
        flags[name] = (default, " ".join(help_text.split()))
    if not flags:
        sys.exit("no flags parsed from --helpfull")
    return flags


def table_flags(path):
    """{name: documented default} from the markdown tables whose first column lists --flags."""
    documented = {}
    for line in open(path, encoding="utf-8"):
        if not line.startswith("| `--"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        names = re.findall(r"`--(\w+)`", cells[0])
        defaults = re.findall(r"`([^`]*)`", cells[1])
        if not defaults:
            word = cells[1].split()[0].lower() if cells[1].split() else ""
            if word not in EMPTY_WORDS:
                sys.exit(f"{path}: default of {names} is neither `value` nor one of "
                         f"{sorted(EMPTY_WORDS)}: {cells[1]!r}")
            defaults = [""]
        if len(defaults) == 1:
            defaults = defaults * len(names)
        if len(defaults) != len(names):
            sys.exit(f"{path}: {len(names)} flags but {len(defaults)} defaults in: {line.strip()}")
        for name, default in zip(names, defaults):
            if name in documented:
                sys.exit(f"{path}: --{name} is listed twice")
            documented[name] = default
    return documented


def main():
    binary, readme, api = sys.argv[1:4]
    flags = server_flags(binary)
    problems = []
    for path, may_omit_testing in ((readme, True), (api, False)):
        documented = table_flags(path)
        for name, (default, help_text) in sorted(flags.items()):
            if name not in documented:
                if not (may_omit_testing and help_text.startswith("Testing only")):
                    problems.append(f"{path}: --{name} is missing (default {default!r})")
            elif documented[name] != default:
                problems.append(f"{path}: --{name} documents default {documented[name]!r}, "
                                f"the server's is {default!r}")
        for name in sorted(set(documented) - set(flags)):
            problems.append(f"{path}: --{name} is not a server flag")
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print(f"{len(flags)} server flags, both tables agree with --helpfull")


if __name__ == "__main__":
    main()
