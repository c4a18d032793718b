#!/usr/bin/env python3
"""The full context on the CPU engine (issue 18): one long sequence (default 32,768 tokens) through
`petal embed --ids --backend cpu` on a tiny random-weight Qwen3 whose config allows 32,768
positions, against HF transformers' Qwen3Model in fp32 on the CPU (causal: SDPA with is_causal, so
no [L, L] mask is materialised; bidirectional: an all-True boolean mask, which needs L^2 bytes).
Prints the cosine and the times. Not a CI test (tens of seconds on 2 cores); run by hand with
torch + transformers (e.g. /work/refvenv/bin/python scripts/ref/long_cpu_check.py build/cpu/bin/petal).
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch


def main():
    petal = sys.argv[1] if len(sys.argv) > 1 else "build/cpu/bin/petal"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 32768
    attention = sys.argv[3] if len(sys.argv) > 3 else "causal"
    d = tempfile.mkdtemp(prefix="petal-long-")
    subprocess.run([petal, "make-model", "--shape", "qwen3-tiny", "--attention", attention,
                    "--dtype", "f32", "--out", d], check=True, capture_output=True)
    cfg_path = os.path.join(d, "config.json")
    cfg = json.load(open(cfg_path))
    cfg["max_position_embeddings"] = 32768
    json.dump(cfg, open(cfg_path, "w"))
    pc = json.load(open(os.path.join(d, "petal_config.json")))
    ids = np.random.default_rng(3).integers(0, cfg["vocab_size"], n).tolist()
    t0 = time.time()
    r = subprocess.run([petal, "embed", "--ids", "--backend", "cpu", "--model", d,
                        "--max-batch-tokens", str(n)], input=json.dumps(ids) + "\n",
                       capture_output=True, text=True)
    t_petal = time.time() - t0
    if r.returncode != 0:
        sys.exit(r.stderr[-2000:])
    got = np.array(json.loads(r.stdout.splitlines()[0]), np.float64)
    from transformers import Qwen3Model
    model = Qwen3Model.from_pretrained(d, dtype=torch.float32, attn_implementation="sdpa").eval()
    x = torch.tensor([ids])
    mask = None if attention == "causal" else torch.ones(1, 1, n, n, dtype=torch.bool)
    t0 = time.time()
    with torch.no_grad():
        h = model(input_ids=x, attention_mask=mask, use_cache=False).last_hidden_state[0].double()
    t_hf = time.time() - t0
    v = h[-1] if pc.get("pooling") == "last_token" else h.mean(0)
    v = (v / v.norm()).numpy()
    cos = float(got @ v / np.linalg.norm(got))
    print(f"{n} tokens, {attention}: Petal CPU {t_petal:.1f} s, HF fp32 CPU {t_hf:.1f} s, "
          f"cosine {cos:.9f} (1 - {1 - cos:.1e})")


if __name__ == "__main__":
    main()
