#!/usr/bin/env python3
"""Tokenizer speed: Petal vs Hugging Face `tokenizers`, single thread, same texts.

For each tokenizer and each size (about 32, 128, 512 and 8192 tokens per text) it builds a set
of distinct texts (seeded), warms both up, then times every text once: MB/s over the set and
p50/p99 latency per text. HF is timed around `Tokenizer.encode` from Python (its per-call
Python overhead is included; that is how a Python gateway would call it).
Writes bench/results/tokenizer_<sha>.json and prints a Markdown table.

Usage: RAYON_NUM_THREADS=1 bench/tokenizer/run_bench.py [--bench build/cpu/bin/tokenizer_bench]
           [--tokenizer NAME=path/to/tokenizer.json ...]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from tokenizers import Tokenizer  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "tokenizer"))
import gen_corpus  # noqa: E402

SIZES = {32: 3000, 128: 1500, 512: 600, 8192: 60}
DEFAULT = ["MiniLM-WordPiece=models/all-MiniLM-L6-v2/tokenizer.json",
           "Qwen3-BPE=models/tokenizers/qwen3/tokenizer.json",
           "mE5-Unigram=models/tokenizers/multilingual-e5-small/tokenizer.json"]


def natural_text(rng, n_chars):
    """Mostly prose-like text with some code, numbers and other scripts, like real traffic."""
    parts, n = [], 0
    while n < n_chars:
        f = rng.choices(["words", "code", "script", "punct", "digit_run", "emoji"],
                        weights=[80, 6, 8, 3, 2, 1])[0]
        p = gen_corpus.piece(rng, f) + rng.choice([" ", " ", ". ", ", ", "\n"])
        parts.append(p)
        n += len(p)
    return "".join(parts)[:n_chars]


def make_set(tok, rng, target, count):
    texts, chars = [], target * 4
    while len(texts) < count:
        t = natural_text(rng, chars)
        n = len(tok.encode(t, add_special_tokens=False).ids)
        if n == 0:
            continue
        chars = max(4, int(chars * (target / n) ** 0.5))  # Steer towards the target size.
        if 0.8 * target <= n <= 1.2 * target:
            texts.append(t)
    return texts


def time_hf(tok, texts):
    for t in texts:
        tok.encode(t)
    lat = []
    start = time.perf_counter()
    for t in texts:
        t0 = time.perf_counter()
        tok.encode(t)
        lat.append((time.perf_counter() - t0) * 1e6)
    total = time.perf_counter() - start
    lat.sort()
    size = sum(len(t.encode()) for t in texts)
    return {"mb_per_s": size / total / 1e6, "p50_us": lat[len(lat) // 2],
            "p99_us": lat[min(len(lat) - 1, int(0.99 * len(lat)))], "total_s": total}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bench", default="build/cpu/bin/tokenizer_bench")
    ap.add_argument("--tokenizer", action="append")
    ap.add_argument("--out-dir", default="bench/results")
    args = ap.parse_args()
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip() or "unknown"
    rows = []
    for spec in args.tokenizer or DEFAULT:
        name, path = spec.split("=", 1)
        if not os.path.exists(path):
            print(f"skip {name}: {path} missing", file=sys.stderr)
            continue
        tok = Tokenizer.from_file(path)
        tok.no_padding()
        tok.no_truncation()
        for target, count in SIZES.items():
            texts = make_set(tok, random.Random(target), target, count)
            with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
                for t in texts:
                    f.write(json.dumps(t) + "\n")
            petal = json.loads(subprocess.run([args.bench, path, f.name], capture_output=True,
                                              text=True, check=True).stdout)
            os.unlink(f.name)
            hf = time_hf(tok, texts)
            row = {"tokenizer": name, "target_tokens": target, "texts": len(texts),
                   "avg_tokens": petal["tokens"] / len(texts), "petal": petal, "hf": hf,
                   "speedup_mb_per_s": petal["mb_per_s"] / hf["mb_per_s"]}
            rows.append(row)
            print(f"{name} {target}: petal {petal['mb_per_s']:.1f} MB/s, hf {hf['mb_per_s']:.1f} MB/s "
                  f"({row['speedup_mb_per_s']:.1f}x)", file=sys.stderr)
    os.makedirs(args.out_dir, exist_ok=True)
    out = os.path.join(args.out_dir, f"tokenizer_{sha}.json")
    with open(out, "w") as f:
        json.dump({"git_sha": sha, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                   "threads": 1, "hf_tokenizers": __import__("tokenizers").__version__,
                   "rows": rows}, f, indent=1)
    print("| tokenizer | tokens/text | Petal MB/s | HF MB/s | speed-up | Petal p50/p99 us | HF p50/p99 us |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        p, h = r["petal"], r["hf"]
        print(f"| {r['tokenizer']} | {r['avg_tokens']:.0f} | {p['mb_per_s']:.1f} | {h['mb_per_s']:.1f} | "
              f"{r['speedup_mb_per_s']:.1f}x | {p['p50_us']:.1f} / {p['p99_us']:.1f} | "
              f"{h['p50_us']:.1f} / {h['p99_us']:.1f} |")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
