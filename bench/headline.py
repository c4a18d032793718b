#!/usr/bin/env python3
"""Draws the README's headline figure, docs/img/headline.png, from the newest committed GPU report
in bench/results/ (the file docs/benchmarks.md is made from): Petal's server against the engines a
user would otherwise run on the same GPU (HF transformers eager and with a CUDA graph,
sentence-transformers), batch-1 latency and throughput on the same pre-tokenized shapes. Every
number comes from that JSON file; none is typed in.

  .venv/bin/python bench/headline.py [bench/results/X.json]   (bench/report.py also calls it)

Needs matplotlib (scripts/requirements.txt); without it, says so and draws nothing.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import IMG, ROOT, load_inputs, scen, systems  # noqa: E402

OUT = os.path.join(IMG, "headline.png")
# Who is drawn (labels as report.systems() names them), in this order.
WANT = ("Petal gRPC (server)", "HF transformers eager", "HF transformers + CUDA graph",
        "sentence-transformers")
LATENCY = [("latency_1x128", "128"), ("latency_1x512", "512"), ("latency_1x4096", "4096")]
THROUGHPUT = [("throughput_100x512", "100 x 512"), ("throughput_100x1024", "100 x 1024"),
              ("throughput_100x4096", "100 x 4096")]


def drawn_systems(d):
    """(label, results) of the systems in WANT that the report has, in WANT's order."""
    out = []
    for want in WANT:
        for label, part in systems(d):
            if label.startswith(want) and all(label != o for o, _ in out):
                out.append((label, part))
                break
    return out


def bars(ax, sys_parts, shapes, key, ylabel, title):
    width = 0.8 / max(1, len(sys_parts))
    for i, (label, part) in enumerate(sys_parts):
        xs, ys = [], []
        for j, (name, _) in enumerate(shapes):
            s = scen(part, name)
            if s and s.get(key):
                xs.append(j + (i - (len(sys_parts) - 1) / 2) * width)
                ys.append(s[key])
        bs = ax.bar(xs, ys, width, label=label)
        ax.bar_label(bs, fmt="%.3g", fontsize=6, padding=1)
    ax.set_xticks(range(len(shapes)), [t for _, t in shapes])
    from matplotlib.ticker import FormatStrFormatter, NullFormatter
    ax.set(yscale="log", ylabel=ylabel, title=title)
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.grid(True, axis="y", which="major", alpha=0.3)


def comparison(d):
    """One README line: Petal's server against each other system of the figure, from `d`."""
    if d is None:
        return "- GPU comparison: **not yet measured**"
    parts = []
    for name, what, key, unit, digits in (("latency_1x128", "batch-1 128 tokens p50", "p50_ms", " ms", 2),
                                          ("throughput_100x512", "100 x 512", "emb_per_s", " emb/s", 0)):
        vals = [(label, (scen(part, name) or {}).get(key)) for label, part in drawn_systems(d)]
        vals = [(label, v) for label, v in vals if v]
        if len(vals) > 1:
            others = ", ".join(f"{label} {v:.{digits}f}" for label, v in vals[1:])
            parts.append(f"{what}: {vals[0][0]} {vals[0][1]:.{digits}f}{unit} ({others})")
    return (f"- Same GPU and shapes, against the Python stacks ({d['_file']}): " + "; ".join(parts))


def draw(d):
    """Writes OUT from the GPU report `d`; returns its path relative to the repository, or None."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no headline plot (pip install -r scripts/requirements.txt)")
        return None
    if d is None:
        print("no GPU report in bench/results/: no headline plot")
        return None
    sys_parts = drawn_systems(d)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    bars(left, sys_parts, LATENCY, "p50_ms", "p50 latency (ms, lower is better)",
         "Batch-1 latency vs tokens")
    left.set_xlabel("tokens (one sequence per request)")
    bars(right, sys_parts, THROUGHPUT, "emb_per_s", "embeddings / s (higher is better)",
         "Throughput, 100 sequences per request")
    right.set_xlabel("sequences x tokens")
    handles, labels = left.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    m = d.get("machine", {})
    fig.suptitle(f"{m.get('gpu', 'GPU')}, {d['model']['name']}: Petal vs the usual Python stacks",
                 fontsize=10)
    fig.text(0.99, 0.005, f"{d['_file']} (commit {d['sha'][:10]}, {d['date'][:10]})",
             ha="right", fontsize=6, color="gray")
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    os.makedirs(IMG, exist_ok=True)
    fig.savefig(OUT, dpi=110, metadata={"Software": None})
    plt.close(fig)
    print(f"wrote {os.path.relpath(OUT, ROOT)}")
    return os.path.relpath(OUT, ROOT)


if __name__ == "__main__":
    draw(load_inputs(sys.argv[1:]).get("gpu"))
