#!/usr/bin/env python3
"""The A/B table of `petal bench engine` results, shared by the env_ab and bin_ab GPU steps.

Reads DIR/<shape>-<side>-r<round>.json (side: a switch value "v<value>" or a build name), writes
DIR/summary.md and prints it: one row per (shape, scenario), one column per side, the rounds'
p50 ms (latency; p99 rows too) or emb/s (throughput) joined by "/".
usage: ab_table.py DIR [--label PREFIX]   (column heads PREFIX<side>, e.g. "PETAL_FOO=")
"""
import argparse
import glob
import json
import os
import re


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    rows, sides = {}, []
    for f in sorted(glob.glob(os.path.join(a.dir, "*-r*.json"))):
        m = re.match(r"(.+?)-(v[^-]+|[^-]+)-r(\d+)\.json$", os.path.basename(f))
        if not m:
            continue
        shape, side, _ = m.groups()
        side = side[1:] if a.label and side.startswith("v") else side
        if side not in sides:
            sides.append(side)
        j = json.load(open(f))
        rows.setdefault((shape, "check_worst_cosine"), {}).setdefault(side, []).append(
            j.get("check_worst_cosine"))
        for name, s in j.get("scenarios", {}).items():
            x = s.get("p50_ms") if s.get("p50_ms") is not None else s.get("emb_per_s")
            rows.setdefault((shape, name), {}).setdefault(side, []).append(x)
            if s.get("p99_ms") is not None:
                rows.setdefault((shape, name + " p99"), {}).setdefault(side, []).append(s["p99_ms"])

    def fmt(name, x):
        if not isinstance(x, float):
            return str(x)
        return f"{x:.6f}" if name == "check_worst_cosine" else f"{x:.3f}"

    out = ["| shape | scenario | " + " | ".join(a.label + s for s in sides) + " |",
           "|---|---|" + "---|" * len(sides)]
    for (shape, name), by in sorted(rows.items()):
        out.append(f"| {shape} | {name} | " +
                   " | ".join("/".join(fmt(name, x) for x in by.get(s, [])) for s in sides) + " |")
    open(os.path.join(a.dir, "summary.md"), "w").write(
        "p50 ms (latency; p99 rows too) or emb/s (throughput), one value per round\n\n" +
        "\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
