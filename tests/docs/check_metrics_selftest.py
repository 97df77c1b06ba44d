#!/usr/bin/python3
"""check_metrics_doc.py and check_dashboard_metrics.py must check a real amount and fail on
drift: a renamed, retyped or relabelled metric in docs/metrics.md, a metric name that does not
exist in a document, a wrong label in a PromQL example, a dashboard or a rule file. Runs both
on the real tree with one file altered (or added) through --replace.

Usage: check_metrics_selftest.py DMLSERVE_BINARY DMLSERVE_CLI SOURCE_ROOT
"""

import json
import pathlib
import re
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
DOC_CHECK = HERE / "check_metrics_doc.py"
DASHBOARD_CHECK = HERE / "check_dashboard_metrics.py"
DASHBOARD = "deploy/grafana/dmlserve-dashboard.json"


def run(check, binary, cli, root, replacements=()):
    args = [sys.executable, str(check), binary, cli, root]
    for rel, path in replacements:
        args += ["--replace", f"{rel}={path}"]
    return subprocess.run(args, capture_output=True, text=True)


def numbers(pattern, text):
    match = re.search(pattern, text)
    assert match, f"no {pattern!r} in {text!r}"
    return [int(group) for group in match.groups()]


def main():
    binary, cli, root = sys.argv[1:4]
    real = run(DOC_CHECK, binary, cli, root)
    assert real.returncode == 0, f"the real documents must pass:\n{real.stdout}{real.stderr}"
    families, rows, mentions, examples = numbers(
        r"(\d+) exported families: (\d+) table rows, (\d+) mentions and (\d+) PromQL", real.stdout)
    assert families >= 15 and rows >= 15 and mentions >= 50 and examples >= 5, real.stdout
    print(real.stdout.strip())
    real = run(DASHBOARD_CHECK, binary, cli, root)
    assert real.returncode == 0, f"the real dashboard must pass:\n{real.stdout}{real.stderr}"
    assert numbers(r"(\d+) expressions", real.stdout)[0] >= 20, real.stdout
    print(real.stdout.strip())

    metrics = pathlib.Path(root, "docs/metrics.md").read_text(encoding="utf-8")
    readme = pathlib.Path(root, "README.md").read_text(encoding="utf-8")
    dashboard = pathlib.Path(root, DASHBOARD).read_text(encoding="utf-8")
    alerts = pathlib.Path(root, "deploy/prometheus/dmlserve-alerts.yml").read_text(encoding="utf-8")
    assert 'up{job=~"dmlserve.*"}' in alerts, "the self-test's anchor rule moved"
    row = "| `dmlserve_queue_depth` | gauge | |"
    assert row in metrics, "the self-test's anchor row moved"
    drifts = [
        ("a renamed table row", DOC_CHECK, "docs/metrics.md",
         metrics.replace(row, "| `dmlserve_queue_length` | gauge | |"),
         ["`dmlserve_queue_length` is not exported", "the metrics table lacks it"]),
        ("a wrong type", DOC_CHECK, "docs/metrics.md",
         metrics.replace(row, "| `dmlserve_queue_depth` | counter | |"),
         ["documented as a counter, the server exports a gauge"]),
        ("a wrong label", DOC_CHECK, "docs/metrics.md",
         metrics.replace(row, "| `dmlserve_queue_depth` | gauge | `device` |"),
         ["documents labels ['device'], the server's are []"]),
        ("a metric that does not exist", DOC_CHECK, "README.md",
         readme + "\nAlert on `dmlserve_request_errors_total`.\n",
         ["README.md:", "dmlserve_request_errors_total is neither a metric"]),
        ("a PromQL example's label", DOC_CHECK, "docs/metrics.md",
         metrics + "\n```promql\nsum by (devices) (dmlserve_device_memory_bytes)\n```\n",
         ["groups by 'devices'"]),
        ("a renamed metric in the dashboard", DASHBOARD_CHECK, DASHBOARD,
         dashboard.replace("dmlserve_queue_depth{", "dmlserve_queue_length{"),
         [f"{DASHBOARD}:", "dmlserve_queue_length is not a metric the server exports"]),
        ("a histogram's bare name in the dashboard", DASHBOARD_CHECK, DASHBOARD,
         dashboard.replace("dmlserve_batch_size_count{", "dmlserve_batch_size{"),
         ["dmlserve_batch_size is not a metric the server exports"]),
        ("a matcher label the metric lacks", DASHBOARD_CHECK, DASHBOARD,
         dashboard.replace('dmlserve_queue_depth{instance=~', 'dmlserve_queue_depth{device=~'),
         ["dmlserve_queue_depth has no label 'device'"]),
        ("a rule file", DASHBOARD_CHECK, "deploy/prometheus/dmlserve-rules.yml",
         "groups:\n  - name: dmlserve\n    rules:\n      - alert: Errors\n        expr: |\n"
         "          sum(rate(dmlserve_request_errors_total[5m])) > 0\n",
         ["deploy/prometheus/dmlserve-rules.yml:5:",
          "dmlserve_request_errors_total is not a metric"]),
        ("a label Prometheus does not give its up series", DASHBOARD_CHECK,
         "deploy/prometheus/dmlserve-alerts.yml",
         alerts.replace('up{job=~"dmlserve.*"}', 'up{pod=~"dmlserve.*"}'),
         ["up has no label 'pod'"]),
    ]
    empty = json.loads(dashboard)
    empty["panels"] = [{"title": "x", "targets": [{"query": "q"}]}]
    drifts.append(("a dashboard without expressions", DASHBOARD_CHECK, DASHBOARD,
                   json.dumps(empty, indent=2).replace('"type": "query"', '"type": "custom"'),
                   ["a dashboard without a single expression"]))
    with tempfile.TemporaryDirectory() as directory:
        copy = pathlib.Path(directory, "copy")
        for what, check, rel, text, expected in drifts:
            copy.write_text(text, encoding="utf-8")
            result = run(check, binary, cli, root, [(rel, copy)])
            assert result.returncode == 1, f"{what} was not caught:\n{result.stdout}{result.stderr}"
            for part in expected:
                assert part in result.stdout, f"{what}: no {part!r} in:\n{result.stdout}"
            print(f"caught {what}: {result.stdout.strip()}")


if __name__ == "__main__":
    main()
