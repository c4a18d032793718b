#!/usr/bin/env python3
"""Per-kernel-family Markdown table of an Nsight Compute raw CSV (ncu --csv --page raw --metrics
...): count, total and mean duration, the SHOWN throughputs averaged with duration weights, and
DRAM bytes summed. Usage: ncu_table.py FILE.csv. Written for scripts/gpu/steps/ncu_bounds.sh."""
import csv
import collections
import re
import sys


# The columns shown (ncu's raw page also lists every device attribute), and their short names.
SHOWN = [
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM %"),
    ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 %"),
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM %"),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "occupancy %"),
    ("launch__grid_size", "CTAs"),
    ("dram__bytes_read.sum", "DRAM read MB"),
]


def family(name):
    n = re.sub(r"^void ", "", name)
    n = n.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    n = re.sub(r"[<(].*", "", n)
    n = re.sub(r"^(\w+::)+", "", n)
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
    metrics = [head.index(m) for m, _ in SHOWN if m in head]
    dur = head.index("gpu__time_duration.sum")
    scale = {"ns": 1e-3, "nsecond": 1e-3, "ms": 1e3, "msecond": 1e3}.get(units[dur], 1.0)  # -> us
    fam = collections.OrderedDict()
    for r in body:
        try:
            d = float(r[dur].replace(",", "")) * scale
        except ValueError:
            continue
        f = fam.setdefault(family(r[ki]), {"n": 0, "us": 0.0, "w": collections.defaultdict(float),
                                         "sum": collections.defaultdict(float)})
        f["n"] += 1
        f["us"] += d
        for i in metrics:
            if i == dur:
                continue
            try:
                v = float(r[i].replace(",", ""))
                if head[i] == "dram__bytes_read.sum":  # a total, in MB: summed, not averaged
                    f["sum"][head[i]] += v * {"byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0,
                                              "Gbyte": 1e3}.get(units[i], 1e-6)
                    continue
                f["w"][head[i]] += v * d
            except ValueError:
                pass
    total = sum(f["us"] for f in fam.values())
    cols = [head[i] for i in metrics if i != dur]
    short = [dict(SHOWN)[c] for c in cols]
    print("%d kernels, %.1f us of kernel time (%s)" % (sum(f["n"] for f in fam.values()), total, path))
    print("| kernel | n | total us | % | mean us | " + " | ".join(short) + " |")
    print("|---|---|---|---|---|" + "---|" * len(cols))
    for k, f in sorted(fam.items(), key=lambda x: -x[1]["us"]):
        vals = [("%.1f" % f["sum"][c]) if c in f["sum"] else
                ("%.1f" % (f["w"][c] / f["us"]) if f["us"] > 0 else "-") for c in cols]
        print("| %s | %d | %.1f | %.1f | %.2f | %s |" % (k, f["n"], f["us"], 100 * f["us"] / total,
                                                       f["us"] / f["n"], " | ".join(vals)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
