#!/usr/bin/python3
"""docs/metrics.md once said prometheus-cpp was not packaged in Debian 12. It is
(prometheus-cpp-dev): where apt knows the package, the doc must name it and must not say
otherwise.

Usage: check_metrics_doc_packages.py docs/metrics.md
"""

import re
import shutil
import subprocess
import sys


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    if re.search(r"prometheus-cpp is not packaged", text, re.I):
        sys.exit("docs/metrics.md says prometheus-cpp is not packaged; Debian 12 has prometheus-cpp-dev")
    if shutil.which("apt-cache"):
        policy = subprocess.run(["apt-cache", "policy", "prometheus-cpp-dev"], capture_output=True,
                                text=True).stdout
        candidate = re.search(r"Candidate: (\S+)", policy)
        if candidate and candidate.group(1) != "(none)" and "prometheus-cpp-dev" not in text:
            sys.exit(f"apt has prometheus-cpp-dev {candidate.group(1)}; docs/metrics.md must name it")
        print(f"prometheus-cpp-dev: {candidate.group(1) if candidate else 'unknown to apt'}; doc agrees")


if __name__ == "__main__":
    main()
