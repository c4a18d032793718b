#!/usr/bin/env python3
"""Regenerates docs/benchmarks.md (and its plots under docs/img/, the headline block of README.md
and its figure docs/img/headline.png, bench/headline.py) from merged results of bench/run_gpu.sh.

  .venv/bin/python bench/report.py                      newest GPU and newest CPU file in bench/results/
  .venv/bin/python bench/report.py bench/results/X.json one or more given files

A GPU section that has no results says "not yet measured"; no number is ever filled in by hand.
Targets (issues 6, 7, 8, 9) are judged on the GPU results only: they are H200 targets.
Needs matplotlib (scripts/requirements.txt) for the plots; without it the tables are still written.
"""
import glob
import json
import os
import sys

from report_common import NA, ROOT, f, scen  # bench/ is on sys.path
from report_fp8 import fp8_lines

DOC = os.path.join(ROOT, "docs", "benchmarks.md")
IMG = os.path.join(ROOT, "docs", "img")
README = os.path.join(ROOT, "README.md")
BEGIN, END = "<!-- bench:begin (bench/report.py) -->", "<!-- bench:end -->"

LAT1 = [128, 512, 4096]
SCORE = [5, 25, 50]
THR = [512, 1024, 4096]


def load_inputs(args):
    files = args or sorted(glob.glob(os.path.join(ROOT, "bench", "results", "*.json")))
    newest = {}
    for path in files:
        try:
            d = json.load(open(path))
        except ValueError:
            continue
        if not isinstance(d, dict) or d.get("report_schema") != 1:
            continue
        d["_file"] = os.path.relpath(os.path.abspath(path), ROOT)
        if d["mode"] not in newest or (d["date"], d["_file"]) > (newest[d["mode"]]["date"], newest[d["mode"]]["_file"]):
            newest[d["mode"]] = d
    return newest



def systems(d):
    """(label, results dict holding "scenarios") for scenarios 1-3, Petal first."""
    out = [("Petal gRPC (server)", d.get("petal_grpc")),
           ("Petal gRPC, busy-polling client", d.get("petal_grpc_busypoll")),
           ("Petal engine (in-process)", d.get("petal_engine"))]
    hf = d.get("hf") or {}
    for mode, label in (("eager", "HF transformers eager"), ("graph", "HF transformers + CUDA graph")):
        if mode in (hf.get("scenarios") or {}):
            out.append((label, {"scenarios": hf["scenarios"][mode]}))
    st = d.get("sentence_transformers")
    if isinstance(st, dict) and "scenarios" in st:
        out.append((f"sentence-transformers ({st.get('device', '?')}, {st.get('dtype', '?')})", st))
    return [(label, p) for label, p in out if isinstance(p, dict) and p.get("scenarios")]



def shapes(d, kind, batch1=None):
    """Sorted (B, L, name) of every scenario of `kind` that some system ran; batch1 True/False
    keeps only B == 1 / B > 1."""
    found = set()
    for _, p in systems(d):
        for name in p.get("scenarios") or {}:
            k, _, shape = name.partition("_")
            if k != kind or "x" not in shape:
                continue
            b, length = map(int, shape.split("x"))
            if batch1 is None or (b == 1) == batch1:
                found.add((b, length, name))
    return sorted(found, key=lambda t: (t[1], t[0]) if batch1 else (t[0], t[1]))


def latency_table(d, names, shape_label):
    syst = systems(d)
    ref = next((p for label, p in syst if label.startswith("Petal gRPC")), None)
    rows = [f"| {shape_label} | system | p50 ms | p90 ms | p99 ms | max ms | p50 / Petal gRPC p50 |",
            "|---|---|---:|---:|---:|---:|---:|"]
    for shape, name in names:
        base = scen(ref, name)
        for label, p in syst:
            s = scen(p, name)
            if s is None:
                continue
            ratio = f"{s['p50_ms'] / base['p50_ms']:.2f}x" if base and base.get("p50_ms") else NA
            rows.append(f"| {shape} | {label} | {f(s.get('p50_ms'), 3)} | {f(s.get('p90_ms'), 3)} | "
                        f"{f(s.get('p99_ms'), 3)} | {f(s.get('max_ms'), 3)} | {ratio} |")
    return "\n".join(rows) if len(rows) > 2 else "_no results_"


def throughput_table(d):
    syst = systems(d)
    ref = next((p for label, p in syst if label.startswith("Petal gRPC")), None)
    rows = ["| request | system | emb/s | Petal gRPC / system |", "|---|---|---:|---:|"]
    for b, length, name in shapes(d, "throughput"):
        base = scen(ref, name)
        for label, p in syst:
            s = scen(p, name)
            if s is None or not s.get("emb_per_s"):
                continue
            ratio = f"{base['emb_per_s'] / s['emb_per_s']:.2f}x" if base and base.get("emb_per_s") else NA
            extra = f" ({s['clients']} clients)" if s.get("clients", 1) > 1 else ""
            rows.append(f"| {b} x {length} | {label}{extra} | {f(s['emb_per_s'], 1)} | {ratio} |")
    return "\n".join(rows) if len(rows) > 2 else "_no results_"


def http_table(d):
    h = d.get("petal_http") or {}
    sc = h.get("scenarios") or {}
    rows = ["| concurrent clients | tokens per text | p50 ms | p90 ms | p99 ms | max ms | p99 / p50 | requests/s | errors |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for k in sorted(sc, key=lambda k: sc[k]["concurrency"]):
        s = sc[k]
        rows.append(f"| {s['concurrency']} | {s.get('prompt_tokens') or '?'} | {f(s['p50_ms'], 3)} | {f(s['p90_ms'], 3)} | {f(s['p99_ms'], 3)} | "
                    f"{f(s['max_ms'], 3)} | {s['p99_ms'] / s['p50_ms']:.2f} | {f(s.get('req_per_s'), 1)} | "
                    f"{s.get('errors', 0)} |")
    return "\n".join(rows) if len(rows) > 2 else "_no results_"


def targets(d):
    """[(target, measured, met)] for the H200 targets of the issues."""
    eng, grpc, http = d.get("petal_engine"), d.get("petal_grpc"), d.get("petal_http")
    out = []

    def add(text, value, ok):
        out.append((text, value, None if value is None else ok))

    for L, lim in zip(LAT1, (1.0, 1.5, 13.0)):
        s = scen(eng, f"latency_1x{L}")
        add(f"engine batch-1 p50 at {L} tokens <= {lim} ms", s and f"{s['p50_ms']:.3f} ms",
            s and s["p50_ms"] <= lim)
        add(f"engine batch-1 p99 at {L} tokens <= 1.3 x p50", s and f"{s['p99_ms'] / s['p50_ms']:.2f} x",
            s and s["p99_ms"] <= 1.3 * s["p50_ms"])
    for B, lim in zip(SCORE, (5.5, 24.0, 48.0)):
        s = scen(eng, f"latency_{B}x512")
        add(f"engine {B} x 512 p50 <= {lim} ms", s and f"{s['p50_ms']:.3f} ms", s and s["p50_ms"] <= lim)
    for L, lim in zip(THR, (1100, 500, 70)):
        s = scen(eng, f"throughput_100x{L}")
        add(f"engine 100 x {L} >= {lim} emb/s", s and f"{s['emb_per_s']:.1f} emb/s", s and s["emb_per_s"] >= lim)
    for L in LAT1:
        e, g = scen(eng, f"latency_1x{L}"), scen(grpc, f"latency_1x{L}")
        ok = e and g
        add(f"gRPC batch-1 p50 at {L} tokens <= engine p50 + 0.3 ms",
            ok and f"{g['p50_ms']:.3f} ms (engine {e['p50_ms']:.3f})", ok and g["p50_ms"] <= e["p50_ms"] + 0.3)
    for L in LAT1:
        e, g = scen(eng, f"latency_1x{L}"), scen(d.get("petal_grpc_busypoll"), f"latency_1x{L}")
        if e and g:
            add(f"gRPC batch-1 p50 at {L} tokens <= engine p50 + 0.3 ms (busy-polling client)",
                f"{g['p50_ms']:.3f} ms (engine {e['p50_ms']:.3f})", g["p50_ms"] <= e["p50_ms"] + 0.3)
    e, g = scen(eng, "throughput_100x512"), scen(grpc, "throughput_100x512")
    ok = e and g
    add("gRPC 100 x 512, 4 clients >= 95% of engine emb/s",
        ok and f"{100 * g['emb_per_s'] / e['emb_per_s']:.1f}%", ok and g["emb_per_s"] >= 0.95 * e["emb_per_s"])
    hs = (http or {}).get("scenarios") or {}
    for c, lim in ((1, 2.0), (16, 14.0)):
        s = hs.get(f"concurrency_{c}")
        add(f"HTTP p50 at {c} concurrent <= {lim} ms", s and f"{s['p50_ms']:.3f} ms", s and s["p50_ms"] <= lim)
    for k in sorted(hs, key=lambda k: hs[k]["concurrency"]):
        s = hs[k]
        add(f"HTTP p99 <= 1.5 x p50 at {s['concurrency']} concurrent", f"{s['p99_ms'] / s['p50_ms']:.2f} x",
            s["p99_ms"] <= 1.5 * s["p50_ms"])
    return out


def plots(d, mode):
    """Three PNGs under docs/img/; returns their paths relative to docs/ (none without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots (pip install -r scripts/requirements.txt)")
        return []
    from matplotlib.ticker import FormatStrFormatter, NullFormatter
    os.makedirs(IMG, exist_ok=True)
    made = []

    def legend(ax):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)

    def plain(ax):  # log axes with plain numbers, no 2x10^2 minor labels
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_formatter(FormatStrFormatter("%g"))
            axis.set_minor_formatter(NullFormatter())
        ax.grid(True, which="both", alpha=0.3)

    def save(fig, name):
        path = os.path.join(IMG, f"bench-{mode}-{name}.png")
        fig.tight_layout()
        fig.savefig(path, dpi=110, metadata={"Software": None})
        plt.close(fig)
        made.append(os.path.relpath(path, os.path.dirname(DOC)))

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, p in systems(d):
        pts = [(L, scen(p, n)) for _, L, n in shapes(d, "latency", True)]
        pts = [(L, s["p50_ms"]) for L, s in pts if s]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=label)
    ax.set(xscale="log", yscale="log", xlabel="tokens (batch 1)", ylabel="p50 latency (ms)",
           title="Batch-1 latency vs tokens")
    ticks = sorted({L for _, L, _ in shapes(d, "latency", True)})
    ax.set_xticks(ticks, [str(L) for L in ticks])
    plain(ax)
    legend(ax)
    save(fig, "latency_vs_tokens")

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, p in systems(d):
        pts = [(L, scen(p, n)) for _, L, n in shapes(d, "throughput")]
        pts = sorted((L, s["emb_per_s"]) for L, s in pts if s and s.get("emb_per_s"))
        if pts:
            ax.plot(*zip(*pts), marker="o", label=label)
    ax.set(xscale="log", yscale="log", xlabel="tokens per sequence (" + ", ".join(
        sorted({f"{b} x {L}" for b, L, _ in shapes(d, "throughput")})) + ")",
           ylabel="embeddings / s", title="Throughput vs sequence length")
    ticks = sorted({L for _, L, _ in shapes(d, "throughput")})
    ax.set_xticks(ticks, [str(L) for L in ticks])
    plain(ax)
    legend(ax)
    save(fig, "throughput_vs_length")

    hs = (d.get("petal_http") or {}).get("scenarios") or {}
    if hs:
        rows = sorted(hs.values(), key=lambda s: s["concurrency"])
        fig, ax = plt.subplots(figsize=(6, 4))
        cs = [s["concurrency"] for s in rows]
        for key in ("p50_ms", "p90_ms", "p99_ms"):
            ax.plot(cs, [s[key] for s in rows], marker="o", label=key.replace("_ms", ""))
        ax.set(xscale="log", xlabel="concurrent clients (one ~512-token text per request)",
               ylabel="latency (ms)", title="HTTP latency vs concurrency (through the gateway)")
        ax.set_xticks(cs, [str(c) for c in cs])
        plain(ax)
        ax.legend()
        save(fig, "latency_vs_concurrency")
    return made


def section(d, mode):
    title = {"gpu": "GPU (H200): CUDA engine, pplx-embed-v1-0.6b shape",
             "cpu": "CPU: CPU engine, all-MiniLM-L6-v2"}[mode]
    lines = [f"## {title}", ""]
    if d is None:
        lines += ["**Not yet measured.** Run `bash bench/run_gpu.sh` on the GPU machine (see above), copy the "
                  "merged JSON into `bench/results/`, then `.venv/bin/python bench/report.py`.", ""]
        return lines
    m = d.get("machine", {})
    mach = f"{m.get('gpu', '?')} (driver {m.get('driver', '?')}), " if mode == "gpu" else ""
    mach += f"{m.get('cpu', '?')}, {m.get('cpu_cores', '?')} cores"
    if m.get("loadavg_1_5_15"):
        mach += f"; load average {m['loadavg_1_5_15'][1]:.1f} over the 5 minutes before the merge"
    lines += [f"- results: `{d['_file']}`, measured {d['date']} at commit `{d['sha'][:12]}` "
              f"(from the {d.get('sha_from', '?')})",
              f"- machine: {mach}",
              f"- model: {d['model']['name']}",
              f"- command: `{d['command']}` ({d.get('seconds_per_scenario')} s per scenario)"]
    acc = d.get("accuracy")
    if isinstance(acc, dict) and "worst_petal_cuda" in acc:
        lines.append(f"- accuracy gate (before timing): worst cosine vs HF transformers fp32 "
                     f"{acc['worst_petal_cuda']:.6f} (HF bf16: {acc['worst_hf_bf16']:.6f}) on lengths "
                     f"{acc['lengths']}: **{'PASS' if acc.get('pass') else 'FAIL: timings below are not valid'}**")
    elif mode == "gpu":
        lines.append("- accuracy gate: **no result** (see steps below)")
    eng = d.get("petal_engine") or {}
    if "check_worst_cosine" in eng and eng["check_worst_cosine"] >= 0:
        lines.append(f"- `petal bench engine` check vs Petal's CPU fp32 engine: worst cosine {eng['check_worst_cosine']:.6f}")
    bad = {k: v for k, v in (d.get("steps") or {}).items() if v["status"] != "ok"}
    if bad:
        lines.append("- steps not run or not complete: " + "; ".join(
            f"{k}: {v['status']} ({v['note']})" for k, v in bad.items()))
    lines.append("")
    if mode == "gpu":
        t = targets(d)
        lines += ["### Targets", "", "| target | measured | |", "|---|---|---|"]
        for text, value, ok in t:
            lines.append(f"| {text} | {value or 'not measured'} | "
                         f"{'met' if ok else ('**missed**' if ok is not None else NA)} |")
        met = sum(1 for _, _, ok in t if ok)
        lines += ["", f"{met} of {len(t)} targets met.", ""]
    else:
        lines += ["The issues' targets are H200 targets; they are not judged on the CPU. The CPU run is a",
                  "check that the whole pipeline works; on a shared machine other jobs' load (above) skews",
                  "its figures, the baseline's in particular (it runs last, with few iterations).", ""]
    lines += ["### 1. Low-latency embedding (pre-tokenized, batch 1, sequential)", "",
              latency_table(d, [(L, n) for _, L, n in shapes(d, "latency", True)], "tokens"), "",
              "### 2. Low-latency scoring (pre-tokenized, N sequences per request, sequential)", "",
              latency_table(d, [(f"{b} x {L}", n) for b, L, n in shapes(d, "latency", False)], "request"), "",
              "### 3. High throughput (many sequences per request)", "",
              throughput_table(d), "",
              "### 4. High concurrency (HTTP through the gateway, ~512-token texts, one per request)", "",
              http_table(d), ""]
    if mode == "gpu":
        lines += fp8_lines(d)
    imgs = plots(d, mode)
    if imgs:
        lines += ["### Plots", ""] + [f"![{os.path.basename(p)}]({p})" for p in imgs] + [""]
    return lines


def headline(d, mode):
    if d is None:
        return f"- {mode.upper()}: **not yet measured**"
    e, g, h = d.get("petal_engine"), d.get("petal_grpc"), (d.get("petal_http") or {}).get("scenarios") or {}
    parts = []
    for name, label in (("latency_1x128", "batch-1 128 tokens"), ("latency_1x512", "batch-1 512 tokens")):
        s = scen(g, name) or scen(e, name)
        if s:
            parts.append(f"{label} p50 {s['p50_ms']:.2f} ms")
    s = scen(g, "throughput_100x512") or scen(e, "throughput_100x512")
    if s:
        parts.append(f"{s['emb_per_s']:.0f} emb/s at 100 x 512")
    if "concurrency_1" in h:
        c1 = h["concurrency_1"]
        toks = f", {c1['prompt_tokens']}-token text" if c1.get("prompt_tokens") else ""
        parts.append(f"HTTP 1 client p50 {c1['p50_ms']:.1f} ms{toks}")
    where = d["machine"].get("gpu", "GPU ?") if mode == "gpu" else f"{d['machine'].get('cpu_cores')}-core CPU"
    return f"- {mode.upper()} ({where}, {d['model']['name']}, `{d['sha'][:10]}`): " + ", ".join(parts)


def main():
    data = load_inputs(sys.argv[1:])
    lines = ["# Benchmarks", "",
             "Generated by `bench/report.py` from the merged results of `bench/run_gpu.sh` in `bench/results/`;",
             "do not edit by hand. Scenarios (issue 9): (1) batch-1 latency at 128/512/4096 tokens, (2) scoring",
             "latency at 5/25/50 x 512, (3) throughput with 100 sequences per request at 512/1024/4096 tokens",
             "(4 concurrent clients over gRPC), (4) HTTP latency through the gateway with tokenization at 1-16",
             "concurrent clients. Scenarios 1-3 send random token ids (pre-tokenized); every system gets the same",
             "shapes. The GPU model is `petal make-model --shape pplx-embed-v1-0.6b` (random weights; real",
             "weights cannot be downloaded here), with the real Qwen3 tokenizer for the HTTP scenario.",
             "",
             "Reproduce: on the GPU machine `bash scripts/gpu/run_on_device.sh report` (or `bash bench/run_gpu.sh`",
             "from an unpacked bundle); on any machine `bash bench/run_gpu.sh --cpu`. Then",
             "`.venv/bin/python bench/report.py`.", ""]
    for mode in ("gpu", "cpu"):
        lines += section(data.get(mode), mode)
    open(DOC, "w").write("\n".join(lines).rstrip() + "\n")
    print(f"wrote {os.path.relpath(DOC, ROOT)}")
    import headline as figure  # bench/headline.py: docs/img/headline.png and its comparison line
    figure.draw(data.get("gpu"))
    text = open(README).read()
    if BEGIN in text and END in text:
        block = "\n".join([BEGIN] + [headline(data.get(m), m) for m in ("gpu", "cpu")] +
                          [figure.comparison(data.get("gpu")), END])
        a, b = text.index(BEGIN), text.index(END) + len(END)
        open(README, "w").write(text[:a] + block + text[b:])
        print("updated the headline block of README.md")


if __name__ == "__main__":
    main()
