#!/usr/bin/env python3
"""Runs dmlserve_d3d12_report --json and checks what it prints.

Usage: check_report_json.py REPORT_BINARY

The shape only, never issue 24's targets (today's kernels miss most of
them; the report is the measuring stick for the rebuild): one JSON object
per case with exactly the documented keys, each figure present where it
applies and null where it does not (docs/d3d12.md, "The kernel report"),
and every figure within physical bounds. P4 must be present: the test runs
on lavapipe, and a missing D3D12 device is a failure, not a skip.
"""

import json
import subprocess
import sys

KEYS = [
    "case", "p1_ops_per_mac", "p2_useful_fraction", "p2_groups_per_sm", "p3_bytes_per_mac",
    "p4_copies_in", "p4_copies_out", "p4_barrier_calls", "p4_stages", "p5_bytes_per_element",
    "p5_sectors_per_load"
]
MATMUL_CASES = [
    "matmul_4096x4096x4096", "matmul_256x4096x4096", "matmul_16x4096x4096",
    "matmul_1x4096x4096", "matmul_1x4096x4096_resident_b", "matmul_64x256x256"
]
SCAN_CASES = ["scan_last_axis_f32_16777216", "scan_strided_f32_4096x4096_axis0"]

MATMUL_ONLY = ["p1_ops_per_mac", "p2_useful_fraction", "p2_groups_per_sm", "p3_bytes_per_mac"]
SCAN_ONLY = ["p5_bytes_per_element", "p5_sectors_per_load"]
EVERY_CASE = ["p4_copies_in", "p4_copies_out", "p4_barrier_calls", "p4_stages"]
INTEGERS = EVERY_CASE

# (low, high), inclusive. Lower bounds are physical where there is one: a MAC
# needs a multiply-add, a scan reads and writes each 4-byte element once, 32
# lanes loading 4 bytes each touch at least 4 sectors of 32 bytes.
BOUNDS = {
    "p1_ops_per_mac": (1.0, 16.0),
    "p2_useful_fraction": (1e-6, 1.0),
    "p2_groups_per_sm": (1e-3, 1e6),
    "p3_bytes_per_mac": (1e-4, 2.0),
    "p4_copies_in": (1, 64),
    "p4_copies_out": (1, 64),
    "p4_barrier_calls": (0, 256),
    "p4_stages": (1, 16),
    "p5_bytes_per_element": (8.0, 64.0),
    "p5_sectors_per_load": (4, 128),
}


def main():
    result = subprocess.run([sys.argv[1], "--json"], capture_output=True, text=True, timeout=1200)
    errors = []
    if result.returncode != 0:
        errors.append(f"exit status {result.returncode}: {result.stderr.strip()}")
    seen = []
    for line in result.stdout.splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(f"not JSON ({e}): {line}")
            continue
        if list(row.keys()) != KEYS:
            errors.append(f"keys {list(row.keys())}, expected {KEYS}")
            continue
        name = row["case"]
        seen.append(name)
        if name in MATMUL_CASES:
            present, absent = MATMUL_ONLY + EVERY_CASE, SCAN_ONLY
        elif name in SCAN_CASES:
            present, absent = SCAN_ONLY + EVERY_CASE, MATMUL_ONLY
        else:
            errors.append(f"unknown case {name}")
            continue
        for key in absent:
            if row[key] is not None:
                errors.append(f"{name}: {key} = {row[key]}, expected null")
        for key in present:
            value = row[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                errors.append(f"{name}: {key} = {value!r}, expected a number")
                continue
            if key in INTEGERS and not isinstance(value, int):
                errors.append(f"{name}: {key} = {value}, expected an integer")
            low, high = BOUNDS[key]
            if not low <= value <= high:
                errors.append(f"{name}: {key} = {value} outside [{low}, {high}]")
    if seen != MATMUL_CASES + SCAN_CASES:
        errors.append(f"cases {seen}, expected {MATMUL_CASES + SCAN_CASES}")
    for error in errors:
        print(error, file=sys.stderr)
    if errors and result.stderr.strip():
        print(f"the report's stderr:\n{result.stderr.strip()}", file=sys.stderr)
    if not errors:
        print(result.stdout, end="")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
