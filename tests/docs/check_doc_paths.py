#!/usr/bin/python3
"""Fails when README.md, docs/*.md or a file under deploy/ names a repository file or folder that
does not exist, or a document links to a markdown file or heading that does not exist.

Usage: check_doc_paths.py SOURCE_ROOT [--replace REL=FILE ...]

--replace reads the document REL (relative to SOURCE_ROOT) from FILE instead (the self-test
checks altered copies that way).

What counts as a repository path (the heuristics, kept narrow so that what is checked is
unambiguous):
- In the markdown documents, candidates are the words of inline code spans (`...`), of fenced
  code blocks, and the targets of markdown links [text](target). In deploy/ (manifests, unit
  files, scripts and their comments) they are the words of every line that contain a / or a
  dot (a bare `server` there is English, not the folder). Inline spans and code blocks are split on white
  space, quotes and the separators = , ; ( ) [ ] < > | so that `--flag=tests/x` or
  `foo(scripts/x.sh)` yield the path.
- A candidate is a repository path only when its first component is a top-level entry of the
  source tree: the entries of SOURCE_ROOT except build outputs (build*, as .gitignore has
  them) and hidden ones other than .ci (e.g. `server/`, `kernels/cpu/packed_b.cc`,
  `scripts/build.sh`, `CMakeLists.txt`, `.ci/...`). Everything else is not looked at: install
  paths (/usr/local/..., /etc/...), build outputs (build/..., build-windows/...), Windows paths
  (C:\\..., .\\dmlserve.exe), URLs (anything with ://), home-relative and ../ paths in commands,
  and names in other folders (dmlserve/v1/...).
- A path ends at its first placeholder component (one with < > { } $ * ? or ...): the part
  before it must exist as a folder (`tests/<suite>/` checks `tests/`); a trailing
  `:LINE`, `:LINE:COL` or `#anchor` is dropped; trailing punctuation . , : ; is dropped, and so
  is a leading ./ (`./run.sh`, `./client/python`).
- A path without an extension may name a C++ module by its stem: `server/response_encoder`
  passes when server/response_encoder.* exists.
- Markdown link targets without a scheme are resolved against the document's folder (as
  GitHub does) and must exist; a #fragment on a link to a markdown file (or a bare #fragment)
  must be one of that file's headings, as GitHub slugs them.
"""

import argparse
import glob
import os
import pathlib
import re
import sys

PLACEHOLDER = re.compile(r"[<>{}$*?]|\.\.\.")
SEPARATORS = re.compile(r"[\s\"'=,;()\[\]<>|`]+")
LINK = re.compile(r"(?<!\!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def top_level_names(root):
    names = set()
    for entry in os.listdir(root):
        if entry.startswith("build"):
            continue
        if entry.startswith(".") and entry != ".ci":
            continue
        names.add(entry)
    return names


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text):
    found, seen = set(), {}
    in_fence = False
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def lines_with_fences(text):
    """(line number, line, whether it is inside a fenced code block), fence lines left out."""
    in_fence = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        yield number, line, in_fence


def candidate_words(text):
    """(line number, word) of every inline code span and fenced code block word."""
    for number, line, in_fence in lines_with_fences(text):
        if in_fence:
            chunks = [line]
        else:
            chunks = re.findall(r"(`+)(.+?)\1", line)
            chunks = [chunk for _, chunk in chunks]
        for chunk in chunks:
            for word in SEPARATORS.split(chunk):
                if word:
                    yield number, word


def repository_path(word, names):
    """The part of `word` to check, or None when it is not a repository path."""
    if "://" in word or "\\" in word:
        return None
    word = word.rstrip(".,:;")
    if word.startswith("./"):
        word = word[2:]
    word = re.sub(r"(:\d+)+$", "", word)
    word = word.split("#", 1)[0]
    first = word.split("/", 1)[0]
    if first not in names:
        return None
    parts = word.split("/")
    kept = []
    for part in parts:
        if PLACEHOLDER.search(part):
            kept.append("")  # what comes before must be a folder
            break
        kept.append(part)
    return "/".join(kept)


def exists(root, path):
    target = root / path
    if path.endswith("/"):
        return target.is_dir()
    if target.exists():
        return True
    # A C++ module by its stem: `server/response_encoder` is its .h and .cc.
    return target.parent.is_dir() and any(target.parent.glob(glob.escape(target.name) + ".*"))


class Checker:
    def __init__(self, root, replacements):
        self.root = root
        self.replacements = replacements
        self.names = top_level_names(root)
        self.problems = []
        self.checked_paths = 0
        self.checked_links = 0
        self._anchor_cache = {}

    def read(self, rel):
        source = self.replacements.get(rel, self.root / rel)
        return pathlib.Path(source).read_text(encoding="utf-8")

    def anchors_of(self, rel):
        if rel not in self._anchor_cache:
            self._anchor_cache[rel] = anchors(self.read(rel))
        return self._anchor_cache[rel]

    def check_deploy_file(self, rel):
        for number, line in enumerate(self.read(rel).splitlines(), 1):
            for word in SEPARATORS.split(line):
                if "/" in word or "." in word:
                    self.check_word(rel, number, word)

    def check_word(self, rel, number, word):
        path = repository_path(word, self.names)
        if path is None:
            return
        self.checked_paths += 1
        if not exists(self.root, path):
            self.problems.append(f"{rel}:{number}: `{word}`: no {path} in the repository")

    def check_document(self, rel):
        text = self.read(rel)
        for number, word in candidate_words(text):
            self.check_word(rel, number, word)
        for number, line, in_fence in lines_with_fences(text):
            if in_fence:
                continue
            line = re.sub(r"`[^`]*`", "", line)
            for target in LINK.findall(line):
                self.check_link(rel, number, target)

    def check_link(self, rel, number, target):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:
            return
        self.checked_links += 1
        path, _, fragment = target.partition("#")
        if path:
            if path.startswith("/"):
                self.problems.append(f"{rel}:{number}: link ({target}): absolute paths do not "
                                     f"resolve on GitHub; link relative to {rel}")
                return
            resolved = os.path.normpath(os.path.join(os.path.dirname(rel), path))
            if resolved.startswith(".."):
                self.problems.append(f"{rel}:{number}: link ({target}) leaves the repository")
                return
            if not (self.root / resolved).exists() and resolved not in self.replacements:
                self.problems.append(f"{rel}:{number}: link ({target}): no {resolved} in the "
                                     "repository")
                return
        else:
            resolved = rel
        if fragment and resolved.endswith(".md"):
            if fragment not in self.anchors_of(resolved):
                self.problems.append(f"{rel}:{number}: link ({target}): {resolved} has no "
                                     f"heading with anchor #{fragment}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--replace", action="append", default=[], metavar="REL=FILE")
    args = parser.parse_args()
    root = pathlib.Path(args.root).resolve()
    replacements = dict(item.split("=", 1) for item in args.replace)
    documents = ["README.md"] + sorted(
        str(path.relative_to(root)) for path in (root / "docs").glob("*.md"))
    checker = Checker(root, replacements)
    for rel in documents:
        checker.check_document(rel)
    deploy_files = sorted(str(path.relative_to(root)) for path in (root / "deploy").rglob("*")
                          if path.is_file())
    for rel in deploy_files:
        checker.check_deploy_file(rel)
    if checker.problems:
        print("\n".join(checker.problems))
        sys.exit(1)
    print(f"{len(documents)} documents and {len(deploy_files)} deploy files: {checker.checked_paths} repository paths and "
          f"{checker.checked_links} links, all resolve")


if __name__ == "__main__":
    main()
