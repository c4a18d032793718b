#!/usr/bin/env python3
"""HF transformers beside `petal bench engine` for the long-document scenarios (issue 18), on the
GPU machine: bf16, SDPA, eager.
  - latency_1x32768: one 32,768-token document, forward + the model's pooling, p50/p90 ms;
  - latechunk_8x4096x16: 8 documents of 4,096 tokens in one batch (equal lengths: no padding),
    each cut into 16 equal chunks whose spans of the last hidden state are mean-pooled and
    L2-normalised (late chunking), chunks/s.
Bidirectional models get an all-True 4D boolean mask (as pplx-embed runs), causal ones none.
Writes JSON to --out.
"""
import argparse
import json
import os
import time

import torch


def load(model_dir):
    from transformers import Qwen3Config, Qwen3Model
    cfg = Qwen3Config.from_pretrained(model_dir)
    cfg._attn_implementation = "sdpa"
    model = Qwen3Model.from_pretrained(model_dir, config=cfg, dtype=torch.bfloat16).cuda().eval()
    pc = os.path.join(model_dir, "petal_config.json")
    j = json.load(open(pc)) if os.path.exists(pc) else {}
    mask = j.get("attention_mask", "causal")
    return model, cfg, mask, j.get("pooling", "mean" if mask == "bidirectional" else "last_token")


@torch.no_grad()
def forward(model, ids, bidirectional):
    mask = None
    if bidirectional:
        b, n = ids.shape
        mask = torch.ones(b, 1, n, n, dtype=torch.bool, device="cuda")
    return model(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state


def timed(fn, iters, warm=2):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    return ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    model, cfg, mask, pooling = load(args.model)
    bidir = mask == "bidirectional"
    g = torch.Generator(device="cuda").manual_seed(5)
    res = {"model": args.model, "mask": mask, "pooling": pooling, "dtype": "bfloat16",
           "attn": "sdpa", "torch": torch.__version__}

    ids = torch.randint(0, cfg.vocab_size, (1, 32768), device="cuda", generator=g)

    def one_doc():
        h = forward(model, ids, bidir)[0]
        v = h.float().mean(0) if pooling == "mean" else h[-1].float()
        return torch.nn.functional.normalize(v, dim=-1)

    ms = timed(one_doc, args.iters)
    res["latency_1x32768"] = {"p50": ms[len(ms) // 2], "p90": ms[int(0.9 * (len(ms) - 1))],
                              "n": len(ms)}
    print(f"HF bf16 {mask}: latency_1x32768 p50 {ms[len(ms) // 2]:.2f} ms")

    docs = torch.randint(0, cfg.vocab_size, (8, 4096), device="cuda", generator=g)

    def late_chunk():
        h = forward(model, docs, bidir).float()  # [8, 4096, H]
        v = h.view(8, 16, 256, -1).mean(2)       # 16 equal chunks per document
        return torch.nn.functional.normalize(v, dim=-1)

    ms = timed(late_chunk, args.iters)
    p50 = ms[len(ms) // 2]
    res["latechunk_8x4096x16"] = {"p50_ms_per_request": p50, "chunks_per_s": 8 * 16 / (p50 / 1e3)}
    print(f"HF bf16 {mask}: latechunk_8x4096x16 {8 * 16 / (p50 / 1e3):.1f} chunks/s "
          f"({p50:.1f} ms per request)")
    json.dump(res, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
