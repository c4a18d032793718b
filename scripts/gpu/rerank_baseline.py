#!/usr/bin/env python3
"""The Python baselines of `petal bench rerank` (issue 17), bf16 on the same GPU, same workload:
one query x DOCS documents per request, pairs of LEN tokens.
- cross-encoders: sentence-transformers CrossEncoder(folder, max_length=LEN,
  model_kwargs={"dtype": bfloat16}).predict(pairs, batch_size=B); the documents are random words
  long enough that every pair is truncated to exactly LEN tokens (checked), so the model sees the
  same shapes as Petal's (Petal's figure excludes tokenization; this one includes it, as a
  CrossEncoder user pays it; the tokenize-only time is reported beside it).
- Qwen3-Reranker: the model card's transformers recipe (Qwen3ForCausalLM in bf16, left padding,
  logits of "yes"/"no" at the last position) on pre-tokenized pairs of LEN tokens (CrossEncoder
  does not load the original Qwen3-Reranker checkpoints); the LM head runs on the last position
  only, which is kinder to the baseline than the card's full-sequence logits.
Sequential requests give p50/p99; CLIENTS threads give pairs/s (the GIL and one CUDA stream make
this close to the sequential rate; it is what a Python server of this kind sustains).
usage: rerank_baseline.py --model DIR --kind crossencoder|qwen3 --out FILE [--lens 256,512]
       [--docs 100] [--seconds 5] [--clients 4] [--batch-size 32]
"""
import argparse
import json
import random
import threading
import time

import numpy as np


def pct(v, q):
    return float(np.percentile(np.asarray(v), q)) if v else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--kind", choices=["crossencoder", "qwen3"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--lens", default="256,512")
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--device", default="cuda", help="cpu only to smoke-test the script")
    args = ap.parse_args()
    import torch
    import transformers
    dev = args.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    res = {"tool": "rerank_baseline.py", "kind": args.kind, "model": args.model,
           "device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu", "torch": torch.__version__,
           "transformers": transformers.__version__, "docs": args.docs,
           "batch_size": args.batch_size, "runs": {}}
    rng = random.Random(0)
    if args.kind == "crossencoder":
        import sentence_transformers
        from sentence_transformers import CrossEncoder
        res["sentence_transformers"] = sentence_transformers.__version__
        words = ["alpha", "river", "stone", "music", "garden", "window", "number", "planet",
                 "silver", "market", "forest", "engine", "letter", "bridge", "winter", "coffee"]
    for L in [int(x) for x in args.lens.split(",")]:
        if args.kind == "crossencoder":
            try:
                ce = CrossEncoder(args.model, max_length=L, device=dev,
                                  model_kwargs={"dtype": torch.bfloat16})
            except TypeError:  # sentence-transformers before model_kwargs
                ce = CrossEncoder(args.model, max_length=L, device=dev)
                ce.model.to(torch.bfloat16)
            query = "what is the capital of france and why"
            docs = [" ".join(rng.choice(words) for _ in range(L + 20)) for _ in range(args.docs)]
            pairs = [(query, d) for d in docs]
            n = len(ce.tokenizer(query, docs[0], truncation=True, max_length=L)["input_ids"])
            assert n == L, (n, L)

            def request():
                ce.predict(pairs, batch_size=args.batch_size, show_progress_bar=False)
            t = time.perf_counter()
            ce.tokenizer([p[0] for p in pairs], [p[1] for p in pairs], truncation=True,
                         max_length=L, padding=True, return_tensors="pt")
            tok_ms = (time.perf_counter() - t) * 1e3
        else:
            try:
                model = transformers.Qwen3ForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16)
            except TypeError:  # transformers 4.x spells it torch_dtype
                model = transformers.Qwen3ForCausalLM.from_pretrained(args.model,
                                                                      torch_dtype=torch.bfloat16)
            model = model.to(dev).eval()
            vocab = model.config.vocab_size
            yes, no = 9693, 2152  # ids only index the logits here (random weights)
            ids = torch.randint(0, vocab, (args.docs, L), device=dev)

            def request():
                with torch.no_grad():
                    for b in range(0, args.docs, args.batch_size):
                        x = ids[b:b + args.batch_size]
                        h = model.model(input_ids=x).last_hidden_state[:, -1]
                        logits = model.lm_head(h)[:, [no, yes]].float()
                        torch.nn.functional.log_softmax(logits, dim=1)[:, 1].exp().cpu()
            tok_ms = 0.0
        for _ in range(2):
            request()
        sync()
        lat = []
        end = time.perf_counter() + args.seconds
        while time.perf_counter() < end or len(lat) < 3:
            t = time.perf_counter()
            request()
            sync()
            lat.append((time.perf_counter() - t) * 1e3)
        count = [0]
        lock = threading.Lock()
        stop = time.perf_counter() + args.seconds

        def client():
            while time.perf_counter() < stop:
                request()
                with lock:
                    count[0] += args.docs
        t0 = time.perf_counter()
        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        sync()
        wall = time.perf_counter() - t0
        run = {"len": L, "p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99), "n": len(lat),
               "pairs_per_s": count[0] / wall, "sequential_pairs_per_s": args.docs * 1e3 / pct(lat, 50),
               "tokenize_ms": tok_ms}
        res["runs"][f"{args.docs}x{L}"] = run
        print(f"{args.kind} {args.docs}x{L}: p50 {run['p50_ms']:.2f} ms p99 {run['p99_ms']:.2f} ms, "
              f"{args.clients} clients {run['pairs_per_s']:.1f} pairs/s")
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
