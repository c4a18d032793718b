#!/usr/bin/env python3
"""Writes the calibration inputs of `petal calibrate` for the fp8 benchmark steps
(scripts/gpu/steps/fp8_calib.sh, bench/run_gpu.sh): 256 texts of about 12 to 1,500 words
(~16 to ~2,000 Qwen3 tokens), each a seeded random concatenation of the texts of
tests/fixtures/golden_texts.jsonl, as JSON Lines {"text": ...}. With --ids VOCAB it writes random
token-id arrays of similar lengths instead (for a model folder without a tokenizer; use
`petal calibrate --ids`). Deterministic (seed 19). Stdlib only.
usage: python3 bench/fp8_calibration_texts.py OUT.jsonl [--ids VOCAB]
"""
import json
import os
import random
import sys


def main():
    out = sys.argv[1]
    ids_vocab = int(sys.argv[sys.argv.index("--ids") + 1]) if "--ids" in sys.argv else 0
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rng = random.Random(19)
    with open(out, "w") as f:
        if ids_vocab:
            for _ in range(256):
                n = rng.choice([16, 64, 256, 800, 2000])
                f.write(json.dumps([rng.randrange(ids_vocab) for _ in range(n)]) + "\n")
            return
        src = os.path.join(root, "tests", "fixtures", "golden_texts.jsonl")
        texts = [json.loads(line)["text"] for line in open(src) if line.strip()]
        for _ in range(256):
            words = rng.choice([12, 48, 200, 600, 1500])
            parts, count = [], 0
            while count < words:
                parts.append(rng.choice(texts))
                count += len(parts[-1].split())
            f.write(json.dumps({"text": " ".join(parts)}) + "\n")


if __name__ == "__main__":
    main()
