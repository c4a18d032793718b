#!/usr/bin/env python3
"""Differential fuzzing: random texts through Hugging Face `tokenizers` and `petal tokenize`
for a bounded time; any difference in ids is written to --out and counted.

Usage: fuzz_parity.py --tokenizer models/NAME/tokenizer.json [--seconds 600] [--seed N]
                      [--petal build/cpu/bin/petal] [--out mismatches.jsonl]
Exits 1 if any mismatch was found.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(__file__))
import gen_corpus  # noqa: E402

# Characters the pipelines treat specially, sampled densely so that they meet each other.
HOT = (list("'sStTmMdDlLrReEvV \t\n\r\x0b\x0c!?.,-_#<>|[]0123456789") +
       ["\u017f", "\u00a0", "\u3000", "\u2028", "\u0085", "\u200b", "\u200d", "\ufeff", "\u0301",
        "\u0345", "\u0316", "\u1ac1", "\u11a7", "\uac00", "\u1100", "\u1161", "\u0130", "\u03a3",
        "\u00df", "\ufb03", "\u2460", "\uff21", "\u0660", "\u4e00", "\u0e01", "\u0c15", "\u0627",
        "\u200f", "\U0001f600", "\U0001f3fd", "\ufe0f", "\U0001f1fa", "\ue000", "\ufffd", "\x00"])


def random_text(rng):
    r = rng.random()
    if r < 0.4:
        return gen_corpus.make_text(rng, rng.randint(1, 400))
    if r < 0.7:
        return "".join(rng.choice(HOT) for _ in range(rng.randint(1, 60)))
    if r < 0.85:
        specials = gen_corpus.SPECIAL_STRINGS
        return "".join(rng.choice(HOT + specials) for _ in range(rng.randint(1, 30)))
    return "".join(gen_corpus.rand_scalar(rng) for _ in range(rng.randint(1, 50)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--batch", type=int, default=3000)
    ap.add_argument("--petal", default="build/cpu/bin/petal")
    ap.add_argument("--out", default="/tmp/petal_fuzz_mismatches.jsonl")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    tok = Tokenizer.from_file(args.tokenizer)
    tok.no_padding()
    tok.no_truncation()
    deadline = time.time() + args.seconds
    total = bad = 0
    with open(args.out, "w") as out:
        while time.time() < deadline:
            texts = [random_text(rng) for _ in range(args.batch)]
            split = rng.random() < 0.3
            tok.encode_special_tokens = split
            want = [e.ids for e in tok.encode_batch(texts)]
            cmd = [args.petal, "tokenize", "--model", args.tokenizer, "--ids-only"]
            if split:
                cmd.append("--split-special-tokens")
            proc = subprocess.run(cmd, input="".join(json.dumps(t) + "\n" for t in texts).encode(),
                                  capture_output=True, check=False)
            if proc.returncode != 0:
                sys.exit(f"petal failed: {proc.stderr.decode()[:1000]}")
            got = [json.loads(l) for l in proc.stdout.decode().splitlines()]
            for t, w, g in zip(texts, want, got):
                if w != g:
                    bad += 1
                    out.write(json.dumps({"text": t, "split_special": split, "hf": w, "petal": g}) + "\n")
            total += len(texts)
    print(f"{args.tokenizer}: fuzzed {total} texts in {args.seconds:.0f}s (seed {args.seed}), "
          f"{bad} mismatches" + (f" -> {args.out}" if bad else ""))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
