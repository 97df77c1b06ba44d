"""What the real server exports on /metrics, for the docs guards.

Starts dmlserve on free loopback ports (tests/python/server_process.py), sends one request of
each operator with dmlserve-cli (when given) so that per-operator series exist even if a family
only gets them on first use, scrapes /metrics once and parses the text exposition format:
families by their # TYPE lines, label names from their samples.
"""

import pathlib
import re
import subprocess
import sys
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
from server_process import ServerProcess  # noqa: E402

# The series name suffixes each type adds to the family name (text format 0.0.4; prometheus-cpp's
# counters are named with their _total already).
SUFFIXES = {"counter": ("",), "gauge": ("",), "untyped": ("",),
            "histogram": ("_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count")}
# Labels a suffix brings with it.
SUFFIX_LABELS = {("histogram", "_bucket"): {"le"}, ("summary", ""): {"quantile"}}
# Labels Prometheus attaches to every scraped series.
TARGET_LABELS = {"instance", "job"}

CLI_REQUESTS = [
    ["cumsum", "--sizes", "1,1,1,3", "--values", "1,2,3", "--axis", "3"],
    ["cumprod", "--sizes", "1,1,1,3", "--values", "1,2,3", "--axis", "3"],
    ["qmatmul", "--a_sizes", "1,1,2,3", "--a_values", "130,128,120,200,10,128", "--a_scale",
     "0.5", "--a_zero_point", "128", "--b_sizes", "1,1,3,2", "--b_values", "1,2,3,4,5,6",
     "--b_scale", "0.25", "--b_zero_point", "128", "--output_scale", "2",
     "--output_zero_point", "100"],
]


class Family:
    def __init__(self, name, kind):
        self.name = name
        self.kind = kind
        self.labels = set()  # of its samples, without le/quantile
        self.sampled = False

    def series_names(self):
        return {self.name + suffix for suffix in SUFFIXES.get(self.kind, ("",))}

    def labels_of(self, series):
        """Label names a query may use on `series` (one of series_names())."""
        suffix = series[len(self.name):]
        return self.labels | SUFFIX_LABELS.get((self.kind, suffix), set()) | TARGET_LABELS


class Exported:
    def __init__(self, text):
        self.families = {}
        for match in re.finditer(r"^# TYPE (\S+) (\S+)$", text, re.M):
            self.families[match.group(1)] = Family(match.group(1), match.group(2))
        self.series = {}
        for family in self.families.values():
            for name in family.series_names():
                self.series[name] = family
        for match in re.finditer(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? \S+", text, re.M):
            family = self.series.get(match.group(1))
            if family is None:
                continue
            family.sampled = True
            labels = set(re.findall(r"(\w+)=\"", match.group(2) or ""))
            family.labels |= labels - {"le", "quantile"}

    def family_of(self, series):
        return self.series.get(series)


def scrape(binary, cli=None):
    with ServerProcess(binary) as server:
        if cli:
            for request in CLI_REQUESTS:
                subprocess.run([cli, f"--server={server.grpc_address}", *request],
                               capture_output=True, text=True, check=True, timeout=60)
        url = f"http://{server.metrics_address}/metrics"
        with urllib.request.urlopen(url, timeout=30) as response:
            text = response.read().decode("utf-8")
    exported = Exported(text)
    if len(exported.families) < 10:
        sys.exit(f"only {len(exported.families)} metric families scraped from {url}:\n{text}")
    return exported
