#!/usr/bin/env python3
"""Renders the engine-level benchmark (petal bench engine + HF transformers baselines, measured in
the same GPU run) as Markdown tables with ratios and the issue's targets marked met or missed.

usage: bench/engine_report.py RESULT.json
RESULT.json holds {"petal": <petal bench engine JSON>, "hf": <bench/baselines/hf_transformers.py
JSON>, "machine": ..., "command": ...} (scripts/gpu/steps/engine_bench.sh writes it).
"""
import json
import sys

# Targets from issue #6 (pplx-embed-v1-0.6b shape, bf16, bidirectional + mean).
LAT_TARGET = {"latency_1x128": 1.0, "latency_1x512": 1.5, "latency_1x4096": 13.0,
              "latency_5x512": 5.5, "latency_25x512": 24.0, "latency_50x512": 48.0}
TPUT_TARGET = {"throughput_100x512": 1100, "throughput_100x1024": 500, "throughput_100x4096": 70}


def main():
    r = json.load(open(sys.argv[1]))
    p, hf = r["petal"]["scenarios"], (r.get("hf") or {}).get("scenarios", {})
    eager, graph = hf.get("eager", {}), hf.get("graph", {})
    out = []
    out.append("| scenario | Petal p50 | p90 | p99 | max | HF eager p50 | HF graph p50 | vs HF graph | target p50 | met |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for k, t in LAT_TARGET.items():
        if k not in p:
            continue
        s = p[k]
        e, g = eager.get(k, {}).get("p50_ms"), graph.get(k, {}).get("p50_ms")
        ratio = f"{g / s['p50_ms']:.1f}x faster" if g else "-"
        met = "yes" if s["p50_ms"] <= t and s["p99_ms"] <= 1.3 * s["p50_ms"] else "no"
        out.append(f"| {k} | {s['p50_ms']:.2f} ms | {s['p90_ms']:.2f} | {s['p99_ms']:.2f} | {s['max_ms']:.2f} | "
                   f"{e:.2f} ms | {g:.2f} ms | {ratio} | <= {t} ms | {met} |" if e and g else
                   f"| {k} | {s['p50_ms']:.2f} ms | {s['p90_ms']:.2f} | {s['p99_ms']:.2f} | {s['max_ms']:.2f} | - | - | - | <= {t} ms | {met} |")
    out.append("")
    out.append("| scenario | Petal emb/s | HF eager emb/s | HF graph emb/s | vs best HF | target | met |")
    out.append("|---|---|---|---|---|---|---|")
    for k, t in TPUT_TARGET.items():
        if k not in p:
            continue
        v = p[k]["emb_per_s"]
        e, g = eager.get(k, {}).get("emb_per_s"), graph.get(k, {}).get("emb_per_s")
        best = max(x for x in (e, g, 0) if x is not None)
        ratio = f"{v / best:.2f}x" if best else "-"
        fmt = lambda x: f"{x:.0f}" if x else "-"
        out.append(f"| {k} | {v:.0f} | {fmt(e)} | {fmt(g)} | {ratio} | >= {t} | {'yes' if v >= t else 'no'} |")
    st = r["petal"].get("engine_stats", {})
    if st:
        out.append("")
        out.append("Engine statistics after the runs: " + ", ".join(f"{k} {v:g}" for k, v in sorted(st.items())))
    print("\n".join(out))


if __name__ == "__main__":
    main()
