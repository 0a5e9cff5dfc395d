#!/usr/bin/env python3
"""Per-kernel totals of an ncu --csv run (gpu__time_duration.sum): launches, total and
mean microseconds, share; grouped by kernel name and grid. Used by all_on_device.sh's
ncu part (docs/PERFORMANCE.md). Usage: ncu_summary.py <ncu.csv> [steps]"""
import csv
import sys
from collections import defaultdict


def main():
    path = sys.argv[1]
    steps = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        print("ncu: no results in", path)
        return
    totals = defaultdict(lambda: [0, 0.0])
    for row in csv.DictReader(lines[start:]):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        ns = float(row["Metric Value"].replace(",", ""))
        key = row["Kernel Name"].split("(")[0] + " grid " + row.get("Grid Size", "")
        totals[key][0] += 1
        totals[key][1] += ns / 1e3
    total = sum(t[1] for t in totals.values())
    print(f"ncu: {sum(t[0] for t in totals.values())} launches, {total:.1f} us (per step: / {steps:g})")
    for key, (n, us) in sorted(totals.items(), key=lambda kv: -kv[1][1])[:25]:
        print(f"  {key:70s} {n / steps:8.1f} x {us / n:8.2f} us = {us / steps:9.1f} us/step {100 * us / total:5.1f} %")


if __name__ == "__main__":
    main()
