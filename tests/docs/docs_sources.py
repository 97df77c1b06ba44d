"""The documents and deploy files the docs guards read, with --replace REL=FILE substitutions
(a self-test checks an altered copy of one file, or adds one, this way)."""

import argparse
import fnmatch
import pathlib
import re
import sys


class Sources:
    def __init__(self, root, replace=()):
        self.root = pathlib.Path(root).resolve()
        self.replacements = dict(item.split("=", 1) for item in replace)

    def read(self, rel):
        return pathlib.Path(self.replacements.get(rel, self.root / rel)).read_text(
            encoding="utf-8")

    def _under(self, folder, pattern):
        found = {str(p.relative_to(self.root)) for p in (self.root / folder).glob(pattern)
                 if p.is_file()}
        name_pattern = pattern.rsplit("/", 1)[-1]
        recursive = pattern.startswith("**/")
        for rel in self.replacements:
            inside = rel[len(folder) + 1:] if rel.startswith(folder + "/") else None
            if inside is not None and (recursive or "/" not in inside) and fnmatch.fnmatch(
                    pathlib.PurePosixPath(rel).name, name_pattern):
                found.add(rel)
        return sorted(found)

    def documents(self):
        """README.md and docs/*.md."""
        return ["README.md"] + self._under("docs", "*.md")

    def deploy_files(self, pattern="**/*"):
        return self._under("deploy", pattern)

    def build_names(self, prefixes=("dmlserve", "exposer")):
        """Words PREFIX_* that CMakeLists.txt and *.cmake files define or use (targets...)."""
        names = set()
        word = re.compile(r"\b(?:%s)_\w+" % "|".join(prefixes))
        for pattern in ("**/CMakeLists.txt", "**/*.cmake"):
            for path in self.root.glob(pattern):
                if path.relative_to(self.root).parts[0].startswith("build"):
                    continue
                names |= set(word.findall(path.read_text(encoding="utf-8", errors="replace")))
        return names


def parse_program_args():
    """The command line of a guard that runs the real programs: BINARY CLI ROOT [--replace ...].
    Returns (args, Sources)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("cli")
    parser.add_argument("root")
    parser.add_argument("--replace", action="append", default=[], metavar="REL=FILE")
    args = parser.parse_args()
    return args, Sources(args.root, args.replace)


def report(problems, summary):
    """Prints the problems and exits 1, or prints `summary` (what was checked) when none."""
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print(summary)
