#!/usr/bin/env python3
"""Kernel time of the last forward pass in one or more Nsight Compute CSVs (ncu --csv --metrics
gpu__time_duration.sum), summed per kernel family, side by side as a Markdown table.
The last forward starts at the last kernel whose name contains --start.
Usage: ncu_families.py --start KERNEL A.csv [B.csv ...]. Written for scripts/gpu/steps/minilm_diag.sh."""
import argparse
import collections
import csv
import os
import re


def last_forward(path, start):
    rows = [r for r in csv.reader(open(path)) if len(r) > 10]
    if not rows:
        raise SystemExit(f"{path}: no ncu rows")
    head = rows[0]
    ki, vi, ui = head.index("Kernel Name"), head.index("Metric Value"), head.index("Metric Unit")
    body = rows[1:]
    starts = [i for i, r in enumerate(body) if start in r[ki]]
    if not starts:
        raise SystemExit(f"{path}: no kernel named like {start}")
    fam = collections.OrderedDict()
    for r in body[starts[-1]:]:
        v = float(r[vi].replace(",", ""))
        scale = {"nsecond": 1e-3, "ns": 1e-3, "msecond": 1e3, "ms": 1e3}  # -> us
        v *= scale.get(r[ui], 1.0)
        name = re.sub(r"^void ", "", r[ki])
        for anon in ("(anonymous namespace)::", "<unnamed>::"):
            name = name.replace(anon, "")
        name = re.sub(r"[<(].*", "", name)[:56]
        n, t = fam.get(name, (0, 0.0))
        fam[name] = (n + 1, t + v)
    return fam


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--start", required=True)
    ap.add_argument("csvs", nargs="+")
    a = ap.parse_args()
    runs = [(os.path.basename(p), last_forward(p, a.start)) for p in a.csvs]
    names = []
    for _, fam in runs:
        names += [n for n in fam if n not in names]
    print("| kernel | " + " | ".join(f"{r} n / us" for r, _ in runs) + " |")
    print("|---|" + "---|" * len(runs))
    for n in names:
        cells = [f"{f[n][0]} / {f[n][1]:.1f}" if n in f else "-" for _, f in runs]
        print(f"| {n} | " + " | ".join(cells) + " |")
    tot = [f"{sum(n for n, _ in f.values())} / {sum(t for _, t in f.values()):.1f}" for _, f in runs]
    print("| **total** | " + " | ".join(tot) + " |")


if __name__ == "__main__":
    main()
