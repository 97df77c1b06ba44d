"""The metric and label names a PromQL expression refers to, and a check of them against what
the server exports (exported_metrics.Exported).

Not a PromQL parser, a tokenizer that is enough for dashboard and alert expressions:
- range and subquery selectors [...] are dropped (they hold durations and $variables);
- by/without/on/ignoring/group_left/group_right (...) give grouping labels;
- NAME{matchers} and {matchers} give a selector with its matcher labels (__name__="x" names
  the metric);
- label_values(NAME, LABEL) (Grafana's variable query) gives a selector and a label;
- every other identifier not followed by ( that is not a keyword is a metric name.
Checked: each metric name is a series the server exports (a family, or a histogram's or
summary's _bucket/_sum/_count); matcher labels are the metric's (or le/quantile where the
series has them, or the target labels instance and job); grouping labels are those of at least
one metric in the expression (or the target labels). The series Prometheus itself records for
each scrape target (up, scrape_duration_seconds, ...) are known too, with the target labels only.
"""

import re

from exported_metrics import TARGET_LABELS

SCRAPE_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped",
                 "scrape_samples_post_metric_relabeling", "scrape_series_added"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
            "group_left", "group_right", "inf", "nan", "atan2", "start", "end"}
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)")
SELECTOR = re.compile(r"([a-zA-Z_:][\w:]*)?\s*\{([^{}]*)\}")
MATCHER = re.compile(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)\s*(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')")
LABEL_VALUES = re.compile(r"\blabel_values\(\s*([a-zA-Z_:][\w:]*)\s*(?:\{([^{}]*)\})?\s*,\s*(\w+)\s*\)")
IDENTIFIER = re.compile(r"(?<![\w.$:])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()")


def references(expr):
    """([(metric, {matcher labels})], {grouping labels})."""
    selectors, grouping = [], set()
    text = expr
    for match in LABEL_VALUES.finditer(text):
        labels = {m.group(1) for m in MATCHER.finditer(match.group(2) or "")}
        selectors.append((match.group(1), labels | {match.group(3)}))
    text = LABEL_VALUES.sub(" ", text)
    text = re.sub(r"\[[^\[\]]*\]", " ", text)
    for match in GROUPING.finditer(text):
        grouping |= {label.strip() for label in match.group(1).split(",") if label.strip()}
    text = GROUPING.sub(" ", text)
    for match in SELECTOR.finditer(text):
        name = match.group(1)
        labels = set()
        for matcher in MATCHER.finditer(match.group(2)):
            if matcher.group(1) == "__name__":
                name = matcher.group(2)[1:-1]
            else:
                labels.add(matcher.group(1))
        if name and name not in KEYWORDS:
            selectors.append((name, labels))
    text = SELECTOR.sub(" ", text)
    text = re.sub(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'", " ", text)
    text = re.sub(r"\b\d[\w.]*", " ", text)  # numbers, 1e-3, durations
    for match in IDENTIFIER.finditer(text):
        if match.group(1).lower() not in KEYWORDS:
            selectors.append((match.group(1), set()))
    return selectors, grouping


def problems(expr, exported):
    """What in `expr` the server does not export, as sentences."""
    selectors, grouping = references(expr)
    found = []
    known_labels = set()
    for name, labels in selectors:
        if name in SCRAPE_SERIES:
            for label in sorted(labels - TARGET_LABELS):
                found.append(f"{name} has no label {label!r} (Prometheus gives it "
                             f"{sorted(TARGET_LABELS)})")
            known_labels |= TARGET_LABELS
            continue
        family = exported.family_of(name)
        if family is None:
            found.append(f"{name} is not a metric the server exports")
            continue
        allowed = family.labels_of(name)
        known_labels |= allowed
        if family.sampled:
            for label in sorted(labels - allowed):
                found.append(f"{name} has no label {label!r} (it has {sorted(allowed)})")
    if selectors and all(name in SCRAPE_SERIES or (exported.family_of(name) and
                                                   exported.family_of(name).sampled)
                         for name, _ in selectors):
        for label in sorted(grouping - known_labels):
            found.append(f"groups by {label!r}, a label of none of "
                         f"{sorted({name for name, _ in selectors})}")
    return found
