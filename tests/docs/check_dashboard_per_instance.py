#!/usr/bin/python3
"""Device names repeat across replicas (every instance has a cpu:0): a Grafana panel that keeps
the device label must keep the instance label too, and show it in its legend, or replicas'
devices merge into one line.

Usage: check_dashboard_per_instance.py deploy/grafana/dmlserve-dashboard.json
"""

import json
import re
import sys


def main():
    dashboard = json.load(open(sys.argv[1], encoding="utf-8"))
    problems, checked = [], 0
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target.get("expr", "")
            for grouping in re.findall(r"\bby \(([^)]*)\)", expr):
                labels = {label.strip() for label in grouping.split(",")}
                if "device" not in labels:
                    continue
                checked += 1
                if "instance" not in labels:
                    problems.append(f"{panel['title']}: groups by device without instance: {expr}")
                if "{{instance}}" not in target.get("legendFormat", ""):
                    problems.append(f"{panel['title']}: legend lacks {{{{instance}}}}: {expr}")
    if problems:
        sys.exit("\n".join(problems))
    print(f"{checked} per-device queries, all per instance")


if __name__ == "__main__":
    main()
