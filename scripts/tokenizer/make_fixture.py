#!/usr/bin/env python3
"""Writes a small parity fixture for the C++ unit test: texts and the ids Hugging Face
`tokenizers` gives them, with and without special tokens, with special-token strings split,
truncated right and left, and as pairs (each text with the next) with the pair template.

Usage: make_fixture.py --tokenizer models/NAME/tokenizer.json --out src/tokenizer/testdata/NAME.jsonl
                       [--count 300] [--seed 7]
"""
import argparse
import json
import os
import random
import sys

from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(__file__))
import gen_corpus  # noqa: E402

TRUNCATE = 16


def encode(path, texts, special=True, split_special=False, truncate=0, left=False):
    tok = Tokenizer.from_file(path)
    tok.no_padding()
    if truncate:
        tok.enable_truncation(truncate, direction="left" if left else "right")
    else:
        tok.no_truncation()
    tok.encode_special_tokens = split_special
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=special)]


def encode_pairs(path, texts, truncate=0):
    tok = Tokenizer.from_file(path)
    tok.no_padding()
    if truncate:
        tok.enable_truncation(truncate)
    else:
        tok.no_truncation()
    pairs = [(texts[i], texts[(i + 1) % len(texts)]) for i in range(len(texts))]
    return [e.ids for e in tok.encode_batch(pairs)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    texts = ["", " ", "a", "Hello, world!", "I'M here; YOU'RE there", "[CLS] <s> <|endoftext|> x",
             "  leading and trailing  ", "İstanbul naïve café ＨＥＬＬＯ ①", "中文 한국어 ไทย తెలుగు",
             "👨‍👩‍👧‍👦 🏳️‍🌈 e\u0301", "\u200b\u200d\ufeff\x00\x07", "1234567890 " * 3]
    while len(texts) < args.count:
        texts.append(gen_corpus.make_text(rng, rng.choice([5, 20, 60, 150, 400])))
    p = args.tokenizer
    cols = {
        "ids": encode(p, texts),
        "ids_no_special": encode(p, texts, special=False),
        "ids_split_special": encode(p, texts, split_special=True),
        "ids_trunc": encode(p, texts, truncate=TRUNCATE),
        "ids_trunc_left": encode(p, texts, truncate=TRUNCATE, left=True),
        # Pair (this text, next text) with the pair template, untruncated and truncated.
        "ids_pair": encode_pairs(p, texts),
        "ids_pair_trunc": encode_pairs(p, texts, truncate=TRUNCATE + 8),
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        for i, t in enumerate(texts):
            row = {"text": t, "truncate": TRUNCATE, "pair_truncate": TRUNCATE + 8} | {
                k: v[i] for k, v in cols.items()}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
