"""Section 5 of docs/benchmarks.md (bench/report.py): bf16 and fp8 side by side, every figure from
the results JSON.
"""
import glob
import os
import sys

from report_common import NA, ROOT, f, scen  # noqa: F401  (bench/ is on sys.path)


# Issue 19's fp8 targets (H200): (shape, scenario, kind, limit); kind "emb" is emb/s >= limit,
# "p50" is p50 ms <= limit; None = no target, shown for comparison.
FP8_ROWS = [("0.6b", "latency_1x128", "p50", 0.9), ("0.6b", "throughput_100x512", "emb", 1800),
            ("0.6b", "throughput_100x4096", "emb", 110), ("4b", "latency_1x128", "p50", None),
            ("4b", "throughput_100x512", "emb", 280)]
FP8_VARIANTS = [("bf16", "bf16"), ("fp8", "fp8, dynamic scales"), ("fp8static", "fp8, static scales")]


def fp8_results(d):
    """The fp8 results: the merged file's "fp8" part (bench/run_gpu.sh), else the newest folder
    bench/results/*-fp8-calib/ (a copy of a scripts/gpu/steps/fp8_calib.sh run's $OUT/fp8_calib)."""
    if d.get("fp8"):
        return d["fp8"]
    dirs = sorted(x for x in glob.glob(os.path.join(ROOT, "bench", "results", "*-fp8-calib")) if os.path.isdir(x))
    if not dirs:
        return {}
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from merge_results import load_fp8
    r = load_fp8(dirs[-1]) or {}
    if r:
        r["dir"] = os.path.relpath(dirs[-1], ROOT)
    return r


def fp8_lines(d):
    """Section 5: bf16 and fp8 (dynamic, static scales) side by side, from fp8_results(d); every
    figure comes from the JSON, none is typed in."""
    fp8 = fp8_results(d)
    eng = fp8.get("engine") or {}
    lines = ["### 5. FP8 (`--quantize fp8`, issue 19): engine, bf16 beside fp8", ""]
    if not eng and not fp8.get("fidelity"):
        return lines + ["_not yet measured_: the fp8 part of `bench/run_gpu.sh` did not run (budget, or "
                        "`PETAL_SKIP_FP8`), and `bench/results/` holds no `*-fp8-calib/` folder (copy of "
                        "`bash scripts/gpu/run_on_device.sh fp8_calib`'s `$OUT/fp8_calib`).", ""]
    lines += [f"- results: `{fp8.get('dir', '?')}`; `petal bench engine` "
              "with `--quantize fp8 --no-fp8-gate` (the start-up gate refuses random-weight models, "
              "docs/performance.md) and the default `--fp8-min-tokens` (2048): batches of fewer tokens, "
              "such as 1 x 128, run the bf16 path inside the fp8 engine. Static scales: `--fp8-scales` "
              "from `petal calibrate`:"]
    for shape, c in sorted((fp8.get("calibration") or {}).items()):
        cal = (c or {}).get("calibration") or {}
        lines.append(f"  - {shape}: {cal.get('statistic', '?')} of per-token amax over {cal.get('texts', '?')} "
                     f"texts / {cal.get('tokens', '?')} tokens, {cal.get('backend', '?')} engine")
    lines += ["", "| shape | scenario | " + " | ".join(label for _, label in FP8_VARIANTS) + " | fp8 target |",
              "|---|---|" + "---:|" * len(FP8_VARIANTS) + "---|"]
    met = total = 0
    for shape, name, kind, lim in FP8_ROWS:
        cells = []
        for v, _ in FP8_VARIANTS:
            run = eng.get(f"{shape}-{v}")
            if run is None and shape == "0.6b" and v == "bf16":
                run = d.get("petal_engine")  # the report's own bf16 engine run, same model
            sc = scen(run, name)
            if sc is None:
                cells.append("not measured")
                continue
            value = sc.get("p50_ms") if kind == "p50" else sc.get("emb_per_s")
            if value is None:
                cells.append("not measured")
                continue
            text = f"{value:.3f} ms p50" if kind == "p50" else f"{value:,.1f} emb/s"
            if lim is not None and v != "bf16":
                ok = value <= lim if kind == "p50" else value >= lim
                met, total = met + ok, total + 1
                text += " (met)" if ok else " (**missed**)"
            cells.append(text)
        target = NA if lim is None else (f"<= {lim} ms" if kind == "p50" else f">= {lim:,} emb/s")
        b, _, length = name.partition("_")[2].partition("x")
        lines.append(f"| {shape} | {b} x {length} | " + " | ".join(cells) + f" | {target} |")
    lines += ["", f"{met} of {total} fp8 figures meet their target.", ""]
    fid = fp8.get("fidelity") or {}
    if fid:
        lines += ["Worst cosine vs HF transformers fp32 (every sequence in fp8: `--fp8-min-tokens 0`):", "",
                  "| model | lengths | Petal bf16 | fp8, dynamic | fp8, static | HF bf16 | rule >= 0.999 (fp8) |",
                  "|---|---|---:|---:|---:|---:|---|"]
        for name, j in sorted(fid.items()):
            if not isinstance(j, dict) or "worst_petal_cuda" not in j:
                continue
            vs = j.get("variants") or {}
            w = [vs.get(k, {}).get("worst") for k in ("fp8", "fp8static")]
            verdict = ", ".join(f"{k}: {'pass' if x >= 0.999 else '**fail**'}"
                                for k, x in zip(("dynamic", "static"), w) if x is not None) or NA
            lens = j.get("lengths") or []
            lines.append(f"| {j.get('model', name)} | {min(lens) if lens else '?'}..{max(lens) if lens else '?'} "
                         f"({len(lens)}) | {j['worst_petal_cuda']:.6f} | {f(w[0], 6)} | {f(w[1], 6)} | "
                         f"{j['worst_hf_bf16']:.6f} | {verdict} |")
        lines.append("")
    return lines
