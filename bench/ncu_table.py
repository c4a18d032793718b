#!/usr/bin/env python3
"""Per-kernel table of one forward pass from an Nsight Compute CSV (scripts/gpu/steps/latency.sh).

Input: `ncu --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum` of `petal bench engine
--no-graphs`. Keeps the last forward pass (from the last embedding kernel to the end), groups
kernels by name (template arguments dropped) and prints, per group: calls, total and per-call
time, DRAM bytes read and the achieved read bandwidth; then the forward's total beside the
weight-reading floor (all DRAM bytes the GEMMs read, at --hbm-tbs TB/s).
usage: ncu_table.py FILE.csv [--markdown] [--hbm-tbs 4.3]
"""
import argparse
import collections
import csv
import re


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--hbm-tbs", type=float, default=4.3, help="achievable HBM read bandwidth")
    a = ap.parse_args()
    rows = [r for r in csv.reader(open(a.csv, errors="replace")) if len(r) > 10]
    if not rows:
        print("no ncu rows in", a.csv)
        return
    h = rows[0]
    ki, mi, vi, ui, ii = (h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value"),
                          h.index("Metric Unit"), h.index("ID"))
    kernels = collections.OrderedDict()  # launch id -> [name, us, bytes]
    for r in rows[1:]:
        k = kernels.setdefault(r[ii], [r[ki], 0.0, 0.0])
        v = float(r[vi].replace(",", "") or 0)
        unit = r[ui]
        if r[mi] == "gpu__time_duration.sum":  # -> microseconds
            k[1] = v * {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3,
                        "msecond": 1e3}.get(unit, 1.0)
        elif r[mi] == "dram__bytes_read.sum":
            k[2] = v * {"byte": 1, "Kbyte": 1e3, "KB": 1e3, "Mbyte": 1e6, "MB": 1e6, "Gbyte": 1e9,
                        "GB": 1e9}.get(unit, 1)
    seq = list(kernels.values())
    starts = [i for i, k in enumerate(seq) if "Embedding" in k[0]]
    seq = seq[starts[-1]:] if starts else seq
    fam = collections.OrderedDict()
    for name, us, b in seq:
        key = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "").replace("void ", "")
        key = re.sub(r"[<(].*", "", key)[:64]
        f = fam.setdefault(key, [0, 0.0, 0.0])
        f[0] += 1
        f[1] += us
        f[2] += b
    total_us = sum(f[1] for f in fam.values())
    gemm_bytes = sum(f[2] for k, f in fam.items() if "nvjet" in k or "gemm" in k.lower() or "SmallM" in k)
    sep = "|" if a.markdown else " "
    print(f"{a.csv.split('/')[-1]}: {len(seq)} kernels, {total_us:.1f} us of kernel time "
          f"(ncu: serialised, caches flushed)\n")
    if a.markdown:
        print("| kernel | calls | total us | us/call | share | MB read | GB/s |")
        print("|---|---|---|---|---|---|---|")
    for k, (n, us, b) in sorted(fam.items(), key=lambda x: -x[1][1]):
        gbs = b / (us * 1e-6) / 1e9 if us > 0 else 0
        cells = [k, str(n), f"{us:.1f}", f"{us / n:.2f}", f"{100 * us / total_us:.1f}%",
                 f"{b / 1e6:.1f}", f"{gbs:.0f}"]
        print(("| " + " | ".join(cells) + " |") if a.markdown else "  ".join(cells))
    floor_us = gemm_bytes / (a.hbm_tbs * 1e12) * 1e6
    print(f"\nGEMM DRAM reads {gemm_bytes / 1e6:.1f} MB: weight-reading floor {floor_us:.1f} us at "
          f"{a.hbm_tbs} TB/s; kernel time {total_us:.1f} us = {total_us / max(floor_us, 1e-9):.1f}x the floor")


if __name__ == "__main__":
    main()
