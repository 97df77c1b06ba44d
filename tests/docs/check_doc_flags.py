#!/usr/bin/python3
"""Fails when a document or deploy file uses or documents a flag the program does not have.

Usage: check_doc_flags.py DMLSERVE_BINARY DMLSERVE_CLI SOURCE_ROOT [--replace REL=FILE ...]

The programs and where their flags come from:
- dmlserve and dmlserve-cli: their own --helpfull (every flag listed, absl's included; the
  defaults of the server_flags.cc / cli/main.cc sections), plus absl's usage flags (--help,
  --helpfull, --version, ...); `dmlserve service <verb>` also takes the --NAME= options that
  server/platform/service_command*.cc parses itself (--service_name);
- dmlserve-load and dmlserve-echo (not built for this check): the ABSL_FLAG definitions in
  the sources their add_executable() lists in bench/**/CMakeLists.txt;
- the Python scripts under bench/ and scripts/ (NAME.py): their argparse add_argument("--x").
What is checked:
1. Tables in README.md and docs/*.md: every table row whose first cell holds `--name` (or
   `--name=value`) belongs to a table whose flags must all be one program's (the first of
   dmlserve, dmlserve-cli, dmlserve-load, dmlserve-echo that has them all). Where that program
   is a built binary and the table's second column is headed "default", each documented default
   must be the program's (`value`, or empty/all/none for ""), as check_flag_tables.py requires
   of the full tables in README.md and docs/api.md (which also checks they are complete).
2. Command lines: in the fenced code blocks and inline code spans (outside tables) of the
   documents and on every line of the files under deploy/ (comments included), after joining continued lines (\\, PowerShell `, an
   unclosed YAML [ list), each command (split at ; && || |) is checked: a --name belongs to
   the nearest program name before it (any path, .exe or not: build/server/dmlserve,
   /usr/local/bin/dmlserve-cli, .\\dmlserve.exe). Flags inside a flag's value
   (dmlserve-load's --server_args="--backend=...") are dmlserve's. Commands of other tools
   (cmake, kubectl, systemctl, ...: EXTERNAL below) are skipped. In deploy/, a --name with no
   program before it is dmlserve's, the program the files deploy (Kubernetes args: lists, the
   Windows install script's flag arrays, comments such as "--backend=auto uses ...");
   in the documents such a command is skipped (it runs some other tool). A problem names the
   line where the (joined) command starts.
"""

import pathlib
import re
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from docs_sources import parse_program_args  # noqa: E402

ABSL_USAGE_FLAGS = {"help", "helpfull", "helpshort", "helppackage", "version", "only_check_args",
                    "helpon", "helpmatch", "flagfile", "fromenv", "tryfromenv", "undefok"}
EMPTY_WORDS = {"empty", "all", "none"}
ORDER = ["dmlserve", "dmlserve-cli", "dmlserve-load", "dmlserve-echo"]
SOURCE_PROGRAMS = ["dmlserve-load", "dmlserve-echo"]
EXTERNAL = {"cmake", "ctest", "cpack", "systemctl", "journalctl", "kubectl", "helm", "docker",
            "podman", "git", "npm", "npx", "node", "pip", "pip3",
            "promtool", "prometheus", "curl", "grpcurl", "protoc", "apt", "apt-get", "sc",
            "New-NetFirewallRule", "Get-NetFirewallRule", "icacls", "perf", "valgrind",
            "wine", "ninja", "make", "gdb"}
FLAG = re.compile(r"^--([A-Za-z_][\w-]*)(?:=(.*))?$", re.S)
TOKEN = re.compile(r"(?:[^\s\"']+|\"(?:[^\"\\]|\\.)*\"|'[^']*')+")


class Program:
    def __init__(self, name, flags, defaults=None, service_flags=()):
        self.name = name
        self.flags = set(flags) | ABSL_USAGE_FLAGS
        self.defaults = defaults
        self.service_flags = set(service_flags)

    def accepts(self, flag, words_before=()):
        return flag in self.flags or (flag in self.service_flags and "service" in words_before)


def helpfull(binary, section):
    result = subprocess.run([binary, "--helpfull"], capture_output=True, text=True)
    text = result.stdout + result.stderr
    flags = set(re.findall(r"^\s+--(\w+) \(", text, re.M))
    match = re.search(r"Flags from \S*" + re.escape(section) + r":\n(.*?)(?:\n  Flags from|\n\nTry)",
                      text, re.S)
    if not match or not flags:
        sys.exit(f"{binary} --helpfull: no 'Flags from .../{section}' section:\n{text}")
    defaults = {}
    for name, default in re.findall(r"--(\w+) \(.*?\);\s+default: (.*?);", match.group(1), re.S):
        default = default.strip()
        if default.startswith('"') and default.endswith('"'):
            default = default[1:-1]
        defaults[name] = default
    return flags, defaults


def source_programs(root):
    """{name: Program} from the ABSL_FLAGs of add_executable(name ...)'s sources."""
    programs = {}
    for cmake in sorted(root.glob("bench/**/CMakeLists.txt")):
        text = cmake.read_text(encoding="utf-8")
        for name, sources in re.findall(r"add_executable\(\s*([\w-]+)\s+([^)]*)\)", text):
            if name not in SOURCE_PROGRAMS:
                continue
            flags = set()
            for source in sources.split():
                path = cmake.parent / source
                if "${" not in source and path.is_file():
                    flags |= set(re.findall(r"ABSL_FLAG\(\s*[^,]+,\s*(\w+)\s*,",
                                            path.read_text(encoding="utf-8")))
            if not flags:
                sys.exit(f"{cmake}: no ABSL_FLAG in the sources of {name}")
            programs[name] = Program(name, flags)
    for name in SOURCE_PROGRAMS:
        if name not in programs:
            sys.exit(f"no add_executable({name} ...) under bench/")
    return programs


def load_programs(binary, cli, root):
    server_flags, server_defaults = helpfull(binary, "server/server_flags.cc")
    service_flags = set()
    for path in root.glob("server/**/service_command*.cc"):
        service_flags |= set(re.findall(r"\"--(\w+)=\"", path.read_text(encoding="utf-8")))
    if not service_flags:
        sys.exit("no \"--NAME=\" option in server/**/service_command*.cc (dmlserve service)")
    programs = {"dmlserve": Program("dmlserve", server_flags, server_defaults, service_flags)}
    if cli:
        cli_flags, cli_defaults = helpfull(cli, "client/cli/main.cc")
        programs["dmlserve-cli"] = Program("dmlserve-cli", cli_flags, cli_defaults)
    programs.update(source_programs(root))
    programs.update(script_programs(root))
    return programs


def script_programs(root):
    """{name.py: Program} of the Python scripts under bench/ and scripts/ (argparse options)."""
    programs = {}
    for path in sorted(list(root.glob("bench/**/*.py")) + list(root.glob("scripts/**/*.py"))):
        flags = set(re.findall(r"add_argument\(\s*['\"]--([\w-]+)['\"]",
                               path.read_text(encoding="utf-8")))
        if flags:
            programs[path.name] = Program(path.name, flags)
    return programs


def program_of(word, programs):
    """The program (ours, or an EXTERNAL name) a word invokes, or None."""
    word = word.strip("\"'[],(){}")
    if word.startswith("-"):
        return None
    word = word.rsplit("=", 1)[-1]  # ExecStart=/usr/local/bin/dmlserve
    base = re.split(r"[/\\]", word)[-1]
    base = re.sub(r"\.exe$", "", base, flags=re.I)
    base = base.rstrip(":")
    if base in programs:
        return base
    if base in EXTERNAL:
        return "external"
    return None


def logical_lines(lines, start=1):
    """(first line number, text) with continued lines joined."""
    current, first, depth = [], None, 0
    for number, line in enumerate(lines, start):
        if first is None:
            first = number
        stripped = line.rstrip()
        depth += stripped.count("[") - stripped.count("]")
        continued = stripped.endswith(("\\", "`", "^")) or depth > 0
        current.append(stripped[:-1] if stripped.endswith(("\\", "`", "^")) else stripped)
        if not continued:
            yield first, " ".join(current)
            current, first, depth = [], None, 0
    if current:
        yield first, " ".join(current)


def commands(text):
    return re.split(r"\s(?:&&|\|\||;|\|)\s|;\s*$|;\s", text)


class Checker:
    def __init__(self, programs):
        self.programs = programs
        self.problems = []
        self.checked_flags = 0
        self.checked_rows = 0

    def check_flag(self, where, program, token, words_before):
        match = FLAG.match(token.strip("\"'[],"))
        if not match:
            return
        name, value = match.group(1), match.group(2)
        self.checked_flags += 1
        if not self.programs[program].accepts(name, words_before):
            self.problems.append(f"{where}: --{name} is not a {program} flag")
        if value:
            for nested in TOKEN.findall(value.strip("\"'")):
                if nested.strip("\"'").startswith("--"):
                    self.check_flag(where, "dmlserve", nested, ())

    def check_command_lines(self, rel, lines, start, default_program):
        for number, line in logical_lines(lines, start):
            for command in commands(line):
                tokens = TOKEN.findall(command.replace("#", " "))
                program, words = default_program, []
                first = next((t for t in tokens if not t.startswith("$") or len(t) > 1), "")
                if program_of(first, self.programs) == "external":
                    continue
                for token in tokens:
                    invoked = program_of(token, self.programs)
                    if invoked == "external":
                        break
                    if invoked:
                        program, words = invoked, []
                        continue
                    if program and token.strip("\"'[],").startswith("--"):
                        self.check_flag(f"{rel}:{number}", program, token, words)
                    else:
                        words.append(token)

    def check_tables(self, rel, lines):
        table = []  # (number, cells)
        for number, line in enumerate(lines + [""], 1):
            if line.startswith("|"):
                table.append((number, [c.strip() for c in line.strip().strip("|").split("|")]))
                continue
            if table:
                self.check_table(rel, table)
            table = []

    def check_table(self, rel, table):
        header = table[0][1]
        rows = []
        for number, cells in table[2:]:
            names = re.findall(r"(?:^|[\s`])--(\w+)", cells[0])
            if names:
                rows.append((number, cells, names))
        if not rows:
            return
        self.checked_rows += len(rows)
        every = {name for _, _, names in rows for name in names}
        owners = [p for p in ORDER if p in self.programs and every <= self.programs[p].flags]
        if not owners:
            best = max((p for p in ORDER if p in self.programs),
                       key=lambda p: len(every & self.programs[p].flags))
            for number, _, names in rows:
                for name in names:
                    self.checked_flags += 1
                    if name not in self.programs[best].flags:
                        self.problems.append(f"{rel}:{number}: --{name} is not a {best} flag (the "
                                             f"table's other flags are {best}'s)")
            return
        program = self.programs[owners[0]]
        self.checked_flags += sum(len(names) for _, _, names in rows)
        if program.defaults is None or len(header) < 2 or header[1].lower() != "default":
            return
        for number, cells, names in rows:
            defaults = re.findall(r"`([^`]*)`", cells[1])
            if not defaults:
                word = cells[1].split()[0].lower() if cells[1].split() else ""
                if word not in EMPTY_WORDS:
                    self.problems.append(f"{rel}:{number}: the default of --{names[0]} is neither "
                                         f"`value` nor one of {sorted(EMPTY_WORDS)}: {cells[1]!r}")
                    continue
                defaults = [""]
            if len(defaults) == 1:
                defaults *= len(names)
            if len(defaults) != len(names):
                self.problems.append(f"{rel}:{number}: {len(names)} flags, {len(defaults)} defaults")
                continue
            for name, default in zip(names, defaults):
                actual = program.defaults.get(name)
                if actual is not None and actual != default:
                    self.problems.append(f"{rel}:{number}: --{name} documents default {default!r}, "
                                         f"{program.name}'s is {actual!r}")


def fenced_blocks(lines):
    """(first line number, lines) of each fenced code block."""
    block, start = None, 0
    for number, line in enumerate(lines, 1):
        if re.match(r"^\s*(```|~~~)", line):
            if block is None:
                block, start = [], number + 1
            else:
                yield start, block
                block = None
        elif block is not None:
            block.append(line)


def main():
    args, sources = parse_program_args()
    checker = Checker(load_programs(args.binary, args.cli, sources.root))
    documents = sources.documents()
    for rel in documents:
        lines = sources.read(rel).splitlines()
        checker.check_tables(rel, lines)
        fenced = set()
        for start, block in fenced_blocks(lines):
            checker.check_command_lines(rel, block, start, None)
            fenced |= set(range(start - 1, start + len(block) + 1))
        for number, line in enumerate(lines, 1):
            if number not in fenced and not line.startswith("|"):
                for _, span in re.findall(r"(`+)(.+?)\1", line):
                    checker.check_command_lines(rel, [span], number, None)
    deploy_files = sources.deploy_files()
    for rel in deploy_files:
        if rel.endswith(".json"):
            continue  # dashboards: PromQL, no command lines
        checker.check_command_lines(rel, sources.read(rel).splitlines(), 1, "dmlserve")
    if checker.problems:
        print("\n".join(checker.problems))
        sys.exit(1)
    print(f"{len(documents)} documents and {len(deploy_files)} deploy files: {checker.checked_rows} "
          f"flag table rows and {checker.checked_flags} flags, all known to "
          f"{', '.join(sorted(checker.programs))}")


if __name__ == "__main__":
    main()
