#!/usr/bin/env python3
"""Summary of the GPU steps `fp8` and `fp8_calib` (scripts/gpu/steps/fp8.sh, fp8_calib.sh): engine
figures of bf16 and fp8 (dynamic, MLP-only, static scales) side by side (and of an earlier build,
`base`, when present), and the fidelity table against HF fp32 with every variant measured.
usage: python3 bench/fp8_report.py DIR [--markdown]   (DIR holds engine-*.json, fidelity-*.json)
"""
import glob
import json
import os
import sys


def load(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return None


def cell(sc):
    if sc is None:
        return "-"
    if "emb_per_s" in sc:
        return f"{sc['emb_per_s']:.1f} emb/s"
    return f"{sc['p50_ms']:.3f} / {sc['p99_ms']:.3f} ms"


def main():
    d = sys.argv[1]
    md = "--markdown" in sys.argv
    runs = {}
    for f in sorted(glob.glob(os.path.join(d, "engine-*.json"))):
        j = load(f)
        if j:
            runs[os.path.basename(f)[len("engine-"):-len(".json")]] = j
    groups = {}
    for name in runs:
        model, _, variant = name.partition("-") if not name.startswith("0.6b-causal") else ("0.6b-causal", "", name[len("0.6b-causal-"):])
        groups.setdefault(model, []).append((variant, runs[name]))
    out = []
    for model, vs in groups.items():
        scen = []
        for _, j in vs:
            for s in j.get("scenarios", {}):
                if s not in scen:
                    scen.append(s)
        names = [v for v, _ in vs]
        out.append(f"\n{model} (p50 / p99 ms or emb/s; sha {vs[0][1].get('sha', '?')})")
        out.append("| scenario | " + " | ".join(names) + " |")
        out.append("|---|" + "---|" * len(names))
        for s in scen:
            out.append(f"| {s} | " + " | ".join(cell(j.get("scenarios", {}).get(s)) for _, j in vs) + " |")
    for f in sorted(glob.glob(os.path.join(d, "fidelity-*.json"))):
        j = load(f)
        if not j:
            continue
        vs = j.get("variants", {})  # fp8, fp8mlp (fp8.sh), fp8static (fp8_calib.sh), ...
        worst = ", ".join(f"petal {k} {v.get('worst', float('nan')):.6f}" for k, v in vs.items())
        out.append(f"\n{j['model']}: worst cosine vs HF fp32: petal bf16 {j['worst_petal_cuda']:.6f}, "
                   f"{worst + ', ' if worst else ''}HF bf16 {j['worst_hf_bf16']:.6f}")
        out.append("| length | petal bf16 | " + "".join(f"petal {k} | " for k in vs) + "HF bf16 |")
        out.append("|---|---|" + "---|" * len(vs) + "---|")
        for i, n in enumerate(j["lengths"]):
            cells = []
            for v in vs.values():
                c = (v.get("cos") or [None] * len(j["lengths"]))[i]
                cells.append("-" if c is None else f"{c:.6f}")
            out.append(f"| {n} | {j['petal_cuda_cos'][i]:.6f} | " + "".join(c + " | " for c in cells)
                       + f"{j['hf_bf16_cos'][i]:.6f} |")
    text = "\n".join(out)
    print(text)
    if md:
        open(os.path.join(d, "fp8_report.md"), "w").write(text + "\n")


if __name__ == "__main__":
    main()
