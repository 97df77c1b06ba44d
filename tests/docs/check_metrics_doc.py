#!/usr/bin/python3
"""Fails when the documented metrics drift from what the real server exports.

Usage: check_metrics_doc.py DMLSERVE_BINARY DMLSERVE_CLI SOURCE_ROOT [--replace REL=FILE ...]

The truth is a scrape of a real server (exported_metrics.py: started on free loopback ports,
one request of each operator sent with dmlserve-cli, /metrics read once). Checked:
- docs/metrics.md's table (header `| Metric | Type | Labels | ...`): every row names an exported
  family, with its type and exactly its labels (those of its samples, le and quantile aside);
  every exported dmlserve_* family has a row, and every other exported family (the exposer's)
  is named somewhere in docs/metrics.md.
- Mentions: every word dmlserve_* or exposer_* in README.md, docs/*.md and the files under
  deploy/ is an exported family or series (a histogram's/summary's _bucket/_sum/_count),
  unless it is part of a file name (next to a / or a .ext, e.g. dmlserve_events.mc) or a name
  the build defines (it appears in a CMakeLists.txt or *.cmake: targets such as dmlserve_bench,
  dmlserve_client).
- PromQL examples: each expression in a ```promql block of the documents (a line and the
  indented lines under it) refers only to exported series and their labels (promql_refs.py).
--replace reads REL (relative to SOURCE_ROOT) from FILE instead; the self-test uses it.
"""

import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import exported_metrics  # noqa: E402
from docs_sources import parse_program_args, report  # noqa: E402
import promql_refs  # noqa: E402

METRICS_DOC = "docs/metrics.md"
MENTION = re.compile(r"(?<![\w/.-])((?:dmlserve|exposer)_\w+)(?![\w/-]|\.\w)")


def metric_table(text):
    """[(line number, name, type, {labels})] of the rows of tables headed | Metric | Type |."""
    rows, in_table = [], False
    for number, line in enumerate(text.splitlines(), 1):
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|"):
            in_table = False
        elif [c.lower() for c in cells[:3]] == ["metric", "type", "labels"]:
            in_table = True
        elif in_table and not set(line) <= set("|-: "):
            names = re.findall(r"`(\w+)`", cells[0])
            labels = set(re.findall(r"`(\w+)`", cells[2]))
            for name in names:
                rows.append((number, name, cells[1], labels))
    return rows


def check_table(sources, exported, problems):
    text = sources.read(METRICS_DOC)
    rows = metric_table(text)
    if len(rows) < 10:
        problems.append(f"{METRICS_DOC}: only {len(rows)} rows in | Metric | Type | Labels | tables")
    documented = set()
    for number, name, kind, labels in rows:
        where = f"{METRICS_DOC}:{number}: `{name}`"
        if name in documented:
            problems.append(f"{where} has two rows")
        documented.add(name)
        family = exported.families.get(name)
        if family is None:
            problems.append(f"{where} is not exported by the server")
            continue
        if kind != family.kind:
            problems.append(f"{where} is documented as a {kind}, the server exports a {family.kind}")
        if family.sampled and labels != family.labels:
            problems.append(f"{where} documents labels {sorted(labels)}, the server's are "
                            f"{sorted(family.labels)}")
    for name, family in sorted(exported.families.items()):
        if name.startswith("dmlserve_") and name not in documented:
            problems.append(f"{METRICS_DOC}: the server exports {name} ({family.kind}, labels "
                            f"{sorted(family.labels)}) and the metrics table lacks it")
        elif not name.startswith("dmlserve_") and not re.search(rf"\b{name}\b", text):
            problems.append(f"{METRICS_DOC}: the server exports {name}; the doc does not name it")
    return len(rows)


def check_mentions(sources, exported, problems):
    build_names = sources.build_names()
    checked = 0
    for rel in sources.documents() + sources.deploy_files():
        for number, line in enumerate(sources.read(rel).splitlines(), 1):
            for name in MENTION.findall(line):
                if name in build_names:
                    continue
                checked += 1
                if name not in exported.families and exported.family_of(name) is None:
                    problems.append(f"{rel}:{number}: {name} is neither a metric the server "
                                    "exports nor a name the build defines")
    return checked


def promql_blocks(text):
    """(line number, expression) of each expression in ```promql blocks."""
    in_block, current = False, None
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r"^\s*```", line):
            if current:
                yield current
            current = None
            in_block = not in_block and line.strip().lower() == "```promql"
            continue
        if not in_block:
            continue
        if not line.strip():
            if current:
                yield current
            current = None
        elif line[0].isspace() and current:
            current = (current[0], current[1] + "\n" + line)
        else:
            if current:
                yield current
            current = (number, line)


def check_promql(sources, exported, problems):
    checked = 0
    for rel in sources.documents():
        for number, expr in promql_blocks(sources.read(rel)):
            checked += 1
            for problem in promql_refs.problems(expr, exported):
                problems.append(f"{rel}:{number}: {problem}: {' '.join(expr.split())}")
    return checked


def main():
    args, sources = parse_program_args()
    exported = exported_metrics.scrape(args.binary, args.cli)
    problems = []
    rows = check_table(sources, exported, problems)
    mentions = check_mentions(sources, exported, problems)
    expressions = check_promql(sources, exported, problems)
    report(problems, f"{len(exported.families)} exported families: {rows} table rows, "
           f"{mentions} mentions and {expressions} PromQL examples agree")


if __name__ == "__main__":
    main()
