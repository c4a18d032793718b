#!/usr/bin/env python3
"""Compares `petal tokenize --ids-only` with Hugging Face `tokenizers` on a JSON Lines corpus.

Usage:
  check_parity.py --tokenizer models/all-MiniLM-L6-v2/tokenizer.json --corpus corpus.jsonl
                  [--petal build/cpu/bin/petal] [--no-special] [--split-special-tokens]
                  [--truncate N] [--show 5] [--report out.json]
Prints the number of texts and mismatches; exits 1 if any text differs.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

from tokenizers import Tokenizer


def hf_encode(path, texts, add_special, split_special, truncate):
    tok = Tokenizer.from_file(path)
    tok.no_padding()
    if truncate:
        tok.enable_truncation(truncate)
    else:
        tok.no_truncation()
    if split_special:
        tok.encode_special_tokens = True
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=add_special)], tok


def petal_encode(petal, path, corpus_bytes, args):
    cmd = [petal, "tokenize", "--model", path, "--ids-only"]
    if args.no_special:
        cmd.append("--no-special")
    if args.split_special_tokens:
        cmd.append("--split-special-tokens")
    if args.truncate:
        cmd += ["--truncate", str(args.truncate)]
    out = subprocess.run(cmd, input=corpus_bytes, capture_output=True, check=False)
    if out.returncode != 0:
        sys.exit(f"petal tokenize failed ({out.returncode}): {out.stderr.decode()[:2000]}")
    return [json.loads(line) for line in out.stdout.decode().splitlines()]


def describe(tok, text, want, got):
    i = next((k for k in range(min(len(want), len(got))) if want[k] != got[k]),
             min(len(want), len(got)))
    lo = max(0, i - 3)
    return {
        "text_prefix": text[:300], "text_len": len(text), "first_diff": i,
        "hf": [tok.id_to_token(t) for t in want[lo:i + 5]],
        "petal": [tok.id_to_token(t) for t in got[lo:i + 5]],
        "hf_len": len(want), "petal_len": len(got),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--petal", default="build/cpu/bin/petal")
    ap.add_argument("--no-special", action="store_true")
    ap.add_argument("--split-special-tokens", action="store_true")
    ap.add_argument("--truncate", type=int, default=0)
    ap.add_argument("--show", type=int, default=5)
    ap.add_argument("--report")
    ap.add_argument("--cache-dir", default="/tmp/petal_parity_cache")
    args = ap.parse_args()
    with open(args.corpus, "rb") as f:
        corpus_bytes = f.read()
    lines = [l for l in corpus_bytes.decode().splitlines() if l]
    texts = [json.loads(l) for l in lines]
    t0 = time.time()
    # HF is slow on big corpora; its answers are cached per (tokenizer, corpus, options).
    key = hashlib.sha256(open(args.tokenizer, "rb").read() + corpus_bytes + repr(
        (args.no_special, args.split_special_tokens, args.truncate)).encode()).hexdigest()[:16]
    cache = os.path.join(args.cache_dir, f"hf_{key}.json") if args.cache_dir else None
    if cache and os.path.exists(cache):
        want, tok = json.load(open(cache)), Tokenizer.from_file(args.tokenizer)
    else:
        want, tok = hf_encode(args.tokenizer, texts, not args.no_special,
                              args.split_special_tokens, args.truncate)
        if cache:
            os.makedirs(args.cache_dir, exist_ok=True)
            json.dump(want, open(cache, "w"))
    t1 = time.time()
    got = petal_encode(args.petal, args.tokenizer, corpus_bytes, args)
    t2 = time.time()
    if len(got) != len(want):
        sys.exit(f"petal returned {len(got)} lines for {len(want)} texts")
    bad = [i for i in range(len(texts)) if want[i] != got[i]]
    print(f"{args.tokenizer}: {len(texts)} texts, {sum(map(len, want))} tokens, "
          f"{len(bad)} mismatches (hf {t1 - t0:.1f}s, petal cli {t2 - t1:.1f}s)")
    details = [describe(tok, texts[i], want[i], got[i]) | {"index": i} for i in bad]
    for d in details[:args.show]:
        print(json.dumps(d, ensure_ascii=False))
    if args.report:
        with open(args.report, "w") as f:
            json.dump({"tokenizer": args.tokenizer, "texts": len(texts), "mismatches": len(bad),
                       "details": details[:200]}, f, ensure_ascii=False, indent=1)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
