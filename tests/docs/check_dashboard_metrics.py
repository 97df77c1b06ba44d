#!/usr/bin/python3
"""Fails when a Grafana dashboard or a Prometheus rule under deploy/ queries a metric or label the
real server does not export.

Usage: check_dashboard_metrics.py DMLSERVE_BINARY DMLSERVE_CLI SOURCE_ROOT [--replace REL=FILE ...]

The truth is a scrape of a real server (exported_metrics.py). The expressions are
- in deploy/**/*.json (Grafana dashboards): every "expr" (panel targets), and the "query" and
  "definition" of template variables of type query (label_values(metric, label));
- in deploy/**/*.yml and *.yaml (Prometheus rule files, PrometheusRule objects): every
  `expr:` value, inline or a | / > block.
Each must name only exported series, with their labels (promql_refs.py says how exactly).
A dashboard without a single expression fails too, so a renamed field cannot empty the check.
--replace reads REL (relative to SOURCE_ROOT) from FILE instead, or adds it.
"""

import json
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import exported_metrics  # noqa: E402
import promql_refs  # noqa: E402
from docs_sources import parse_program_args, report  # noqa: E402


def line_of(text, value, taken):
    """The first line of `text` (JSON) not in `taken` where the string `value` is (0: none)."""
    encoded = json.dumps(value)[1:-1]
    for number, line in enumerate(text.splitlines(), 1):
        if encoded in line and number not in taken:
            taken.add(number)
            return number
    return 0


def dashboard_expressions(text):
    """(line, where, expression) of a Grafana dashboard."""
    dashboard = json.loads(text)
    found, taken = [], set()

    def panels(items, path):
        for panel in items or []:
            title = f"{path}panel {panel.get('title', panel.get('id', '?'))!r}"
            for target in panel.get("targets", []):
                if isinstance(target.get("expr"), str) and target["expr"].strip():
                    found.append((line_of(text, target["expr"], taken), title, target["expr"]))
            panels(panel.get("panels"), f"{title} > ")

    panels(dashboard.get("panels"), "")
    for row in dashboard.get("rows", []):  # the pre-5.0 layout
        panels(row.get("panels"), "")
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        for value in {query, variable.get("definition")}:
            if isinstance(value, str) and value.strip():
                found.append((line_of(text, value, taken), f"variable ${variable.get('name')}", value))
    return found


def rule_expressions(text):
    """(line, where, expression) of every `expr:` in a YAML file."""
    found = []
    lines = text.splitlines()
    for index, line in enumerate(lines):
        match = re.match(r"^(\s*)(?:-\s+)?expr:\s*(.*?)\s*$", line)
        if not match or line.lstrip().startswith("#"):
            continue
        indent, value = len(match.group(1)), match.group(2)
        if value[:1] in ("|", ">"):
            block = []
            for following in lines[index + 1:]:
                if following.strip() and len(following) - len(following.lstrip()) <= indent:
                    break
                block.append(following)
            value = "\n".join(block)
        elif value[:1] in ("'", '"'):
            value = value[1:-1]
        found.append((index + 1, "expr", value))
    return found


def main():
    args, sources = parse_program_args()
    exported = exported_metrics.scrape(args.binary, args.cli)
    problems, checked, files = [], 0, 0
    expressions = []
    for rel in sources.deploy_files("**/*.json"):
        text = sources.read(rel)
        if '"panels"' not in text:
            continue
        found = dashboard_expressions(text)
        if not found:
            problems.append(f"{rel}: a dashboard without a single expression")
        files += 1
        expressions += [(rel, *item) for item in found]
    for pattern in ("**/*.yml", "**/*.yaml"):
        for rel in sources.deploy_files(pattern):
            found = rule_expressions(sources.read(rel))
            files += bool(found)
            expressions += [(rel, *item) for item in found]
    for rel, number, where, expr in expressions:
        checked += 1
        for problem in promql_refs.problems(expr, exported):
            problems.append(f"{rel}:{number}: {where}: {problem}: {' '.join(expr.split())}")
    if files == 0:
        problems.append("no dashboard under deploy/")
    report(problems, f"{checked} expressions in {files} files query only what the server exports "
           f"({len(exported.families)} families)")


if __name__ == "__main__":
    main()
