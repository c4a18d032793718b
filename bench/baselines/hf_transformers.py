#!/usr/bin/env python3
"""HF transformers baselines for the engine-level scenarios, run on the GPU machine.

Loads a Qwen3 checkpoint folder (e.g. one written by `petal make-model`) as transformers'
Qwen3Model in bf16 with SDPA attention, bidirectional through an all-True 4D boolean mask (as
pplx-embed models run) unless the folder's petal_config.json says causal, mean or last-token
pooled, L2-normalised. Times the same scenarios as `petal bench engine`:
  1. batch-1 sequential at 128 / 512 / 4096 tokens (p50/p90/p99/max ms)
  2. 5 / 25 / 50 sequences of 512 (p50/p90/p99/max ms)
  3. 100 sequences at 512 / 1024 / 4096 (emb/s)
Modes: `eager` (plain forward) and `graph` (forward captured in a torch.cuda.CUDAGraph per
shape, replayed). Inputs are random token ids, identical lengths across the batch (padding-free).
Writes JSON to --out.
"""
import argparse
import json
import os
import time

import torch


def load(model_dir, dtype):
    from transformers import Qwen3Config, Qwen3Model

    cfg = Qwen3Config.from_pretrained(model_dir)
    cfg._attn_implementation = "sdpa"
    model = Qwen3Model.from_pretrained(model_dir, config=cfg, torch_dtype=dtype).cuda().eval()
    mask_kind = "causal"
    pooling = "last_token"
    pc = os.path.join(model_dir, "petal_config.json")
    if os.path.exists(pc):
        j = json.load(open(pc))
        mask_kind = j.get("attention_mask", mask_kind)
        pooling = j.get("pooling", "mean" if mask_kind == "bidirectional" else "last_token")
    return model, cfg, mask_kind, pooling


class Runner:
    """One forward+pool for a fixed (batch, length) shape; optionally captured in a CUDA graph."""

    def __init__(self, model, cfg, mask_kind, pooling, batch, length, graph):
        self.model, self.pooling = model, pooling
        self.ids = torch.randint(0, cfg.vocab_size, (batch, length), device="cuda")
        self.mask = None
        if mask_kind == "bidirectional":
            self.mask = torch.ones(batch, 1, length, length, dtype=torch.bool, device="cuda")
        self.graph = None
        if graph:
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    self.out = self._fwd()
            torch.cuda.current_stream().wait_stream(s)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.out = self._fwd()

    @torch.inference_mode()
    def _fwd(self):
        h = self.model(input_ids=self.ids, attention_mask=self.mask).last_hidden_state
        pooled = h.mean(dim=1) if self.pooling == "mean" else h[:, -1]
        return torch.nn.functional.normalize(pooled.float(), dim=-1)

    def __call__(self):
        if self.graph is not None:
            self.graph.replay()
            return self.out
        return self._fwd()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def latency(run, iters, warm=3):
    for _ in range(warm):
        run()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        run().cpu()  # result on the host, as a server would need it
        ts.append((time.perf_counter() - t0) * 1e3)
    return {"p50_ms": pct(ts, 50), "p90_ms": pct(ts, 90), "p99_ms": pct(ts, 99), "max_ms": max(ts), "n": iters}


def throughput(run, batch, seconds, warm=2):
    for _ in range(warm):
        run()
    torch.cuda.synchronize()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds or n < 2:
        run().cpu()
        n += 1
    dt = time.perf_counter() - t0
    return {"emb_per_s": n * batch / dt, "batches": n, "seconds": dt}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--modes", default="eager,graph")
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    args = ap.parse_args()
    torch.manual_seed(0)
    model, cfg, mask_kind, pooling = load(args.model, torch.bfloat16)
    it = 30 if args.quick else 100
    res = {"engine": "hf-transformers", "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
           "mask": mask_kind, "pooling": pooling, "scenarios": {}}

    def done():  # results so far, so that a run cut short by a time limit keeps them
        json.dump(res, open(args.out, "w"), indent=1)

    for mode in args.modes.split(","):
        graph = mode == "graph"
        r = res["scenarios"][mode] = {}

        for L in (128, 512, 4096):
            r[f"latency_1x{L}"] = latency(Runner(model, cfg, mask_kind, pooling, 1, L, graph), it)
            done()
        for B in (5, 25, 50):
            r[f"latency_{B}x512"] = latency(Runner(model, cfg, mask_kind, pooling, B, 512, graph), max(10, it // 3))
            done()
        for L in (512, 1024, 4096):
            r[f"throughput_100x{L}"] = throughput(Runner(model, cfg, mask_kind, pooling, 100, L, graph), 100,
                                                  3.0 if args.quick else 6.0)
            done()
        torch.cuda.empty_cache()
        print(mode, json.dumps(r, indent=None)[:2000], flush=True)
    json.dump(res, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
