#!/usr/bin/env python3
"""Per-kernel-family table of an Nsight Compute raw CSV (ncu --csv --page raw --metrics ...):
count, total and mean duration, and the means of every other numeric metric, weighted by
duration. Usage: ncu_table.py FILE.csv [--md]. Written for scripts/gpu/steps/ncu_bounds.sh."""
import csv
import collections
import re
import sys


def family(name):
    n = re.sub(r"^void ", "", name)
    n = re.sub(r"[<(].*", "", n)
    if "sm90_xmma_gemm" in n or n.startswith("nvjet") or "gemm" in n.lower():
        return "GEMM " + n[:64]
    return n[:48]


def main():
    path = sys.argv[1]
    rows = [r for r in csv.reader(open(path)) if len(r) > 5]
    if len(rows) < 3:
        print("no ncu rows in", path)
        return 0
    start = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if start is None or start + 2 > len(rows):
        print("no ncu header in", path)
        return 0
    head, units, body = rows[start], rows[start + 1], rows[start + 2:]
    ki = head.index("Kernel Name")
    metrics = [i for i, h in enumerate(head) if "__" in h]
    dur = head.index("gpu__time_duration.sum")
    scale = 1e-3 if units[dur] == "nsecond" else (1e3 if units[dur] == "msecond" else 1.0)
    fam = collections.OrderedDict()
    for r in body:
        try:
            d = float(r[dur].replace(",", "")) * scale
        except ValueError:
            continue
        f = fam.setdefault(family(r[ki]), {"n": 0, "us": 0.0, "w": collections.defaultdict(float)})
        f["n"] += 1
        f["us"] += d
        for i in metrics:
            if i == dur:
                continue
            try:
                f["w"][head[i]] += float(r[i].replace(",", "")) * d
            except ValueError:
                pass
    total = sum(f["us"] for f in fam.values())
    cols = [head[i] for i in metrics if i != dur]
    short = [c.replace(".avg.pct_of_peak_sustained_elapsed", " %").replace("__", ".") for c in cols]
    print("%d kernels, %.1f us of kernel time (%s)" % (sum(f["n"] for f in fam.values()), total, path))
    print("| kernel | n | total us | % | mean us | " + " | ".join(short) + " |")
    print("|---|---|---|---|---|" + "---|" * len(cols))
    for k, f in sorted(fam.items(), key=lambda x: -x[1]["us"]):
        vals = ["%.1f" % (f["w"][c] / f["us"]) if f["us"] > 0 else "-" for c in cols]
        print("| %s | %d | %.1f | %.1f | %.2f | %s |" % (k, f["n"], f["us"], 100 * f["us"] / total,
                                                       f["us"] / f["n"], " | ".join(vals)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
