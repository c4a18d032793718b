#!/usr/bin/env python3
"""sentence-transformers baseline for the pre-tokenized scenarios of `petal bench engine`.

Times a SentenceTransformer model's own forward (Transformer -> Pooling -> Normalize modules) on
random token ids of exact lengths, as `petal bench engine` and bench/baselines/hf_transformers.py
do, so the three are compared on the same shapes (no tokenization in the timed region):
  latency_BxL     one request at a time, B sequences of L tokens: p50/p90/p99/max ms
  throughput_BxL  back-to-back requests of B x L: embeddings per second
Results are on the host (`.cpu()`) as a server would need them.

`--assemble-from HF_DIR` first builds a sentence-transformers folder from a Hugging Face
checkpoint (e.g. the one `petal make-model --tokenizer ...` writes): config, weights and
tokenizer files linked, plus modules.json, mean pooling and normalisation. Note that
transformers' Qwen3Model attends causally by default; for these timings the mask kind changes
little (the same matrix shapes), and it is recorded in the output.
Writes JSON to --out. Exits 0 with {"skipped": reason} if sentence-transformers is missing.
"""
import argparse
import json
import os
import sys
import time


def assemble(hf_dir, dest):
    """A sentence-transformers folder around the HF checkpoint `hf_dir` (files linked, not copied)."""
    os.makedirs(os.path.join(dest, "1_Pooling"), exist_ok=True)
    os.makedirs(os.path.join(dest, "2_Normalize"), exist_ok=True)
    for f in os.listdir(hf_dir):
        src, dst = os.path.join(os.path.abspath(hf_dir), f), os.path.join(dest, f)
        if os.path.isfile(src) and not os.path.exists(dst):
            os.symlink(src, dst)
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    if not os.path.exists(os.path.join(dest, "tokenizer_config.json")):
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast"},
                  open(os.path.join(dest, "tokenizer_config.json"), "w"))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    json.dump(modules, open(os.path.join(dest, "modules.json"), "w"), indent=1)
    json.dump({"max_seq_length": cfg.get("max_position_embeddings", 8192), "do_lower_case": False},
              open(os.path.join(dest, "sentence_bert_config.json"), "w"))
    json.dump({"word_embedding_dimension": cfg["hidden_size"], "pooling_mode_mean_tokens": True},
              open(os.path.join(dest, "1_Pooling", "config.json"), "w"))
    return dest


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="sentence-transformers folder (or HF folder with --assemble-from)")
    ap.add_argument("--assemble-from", help="HF checkpoint to wrap into --model first")
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--scenarios", default="latency_1x128,latency_1x512,latency_1x4096,latency_5x512,"
                    "latency_25x512,latency_50x512,throughput_100x512,throughput_100x1024,throughput_100x4096")
    ap.add_argument("--seconds", type=float, default=2.0, help="time per scenario")
    ap.add_argument("--max-iters", type=int, default=100)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = ap.parse_args()
    try:
        import torch
        from sentence_transformers import SentenceTransformer
        import sentence_transformers
    except ImportError as e:
        json.dump({"skipped": f"sentence-transformers not installed ({e})"}, open(args.out, "w"))
        print(f"sentence-transformers baseline skipped: {e}")
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.assemble_from:
        assemble(args.assemble_from, args.model)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    model = SentenceTransformer(args.model, device=args.device, model_kwargs={"torch_dtype": dtype})
    model.eval()
    # Ids are given directly, so ST's max_seq_length (a tokenizer truncation setting) does not
    # apply; the model's position limit does.
    max_len = getattr(model[0].auto_model.config, "max_position_embeddings", 1 << 30)
    vocab = model[0].auto_model.config.vocab_size
    causal = getattr(model[0].auto_model.config, "is_causal", None)
    res = {"engine": "sentence-transformers", "version": sentence_transformers.__version__,
           "torch": torch.__version__, "device": args.device, "dtype": args.dtype,
           "threads": torch.get_num_threads(), "model": args.model,
           "attention": "causal (transformers default)" if causal or "qwen" in type(model[0].auto_model).__name__.lower()
           else "bidirectional", "scenarios": {}}
    if args.device == "cuda":
        res["gpu"] = torch.cuda.get_device_name()
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    g = torch.Generator().manual_seed(0)
    for name in args.scenarios.split(","):
        kind, shape = name.split("_")
        b, length = map(int, shape.split("x"))
        if length > max_len:
            res["scenarios"][name] = {"skipped": f"{length} tokens > model maximum {max_len}"}
            print(f"  {name:22s} skipped: {length} > {max_len}")
            continue
        ids = torch.randint(0, vocab, (b, length), generator=g).to(args.device)
        feats = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

        @torch.inference_mode()
        def run():
            return model(dict(feats))["sentence_embedding"].float().cpu()

        for _ in range(2):
            run()
        sync()
        if kind == "latency":
            ts, t_end = [], time.perf_counter() + args.seconds
            while (time.perf_counter() < t_end or len(ts) < 5) and len(ts) < args.max_iters:
                t0 = time.perf_counter()
                run()
                ts.append((time.perf_counter() - t0) * 1e3)
            r = {"seqs": b, "len": length, "p50_ms": pct(ts, 50), "p90_ms": pct(ts, 90),
                 "p99_ms": pct(ts, 99), "max_ms": max(ts), "mean_ms": sum(ts) / len(ts), "n": len(ts)}
            print(f"  {name:22s} p50 {r['p50_ms']:8.3f}  p99 {r['p99_ms']:8.3f} ms (n={len(ts)})", flush=True)
        else:
            n, t0 = 0, time.perf_counter()
            while (time.perf_counter() - t0 < args.seconds or n < 2) and n < args.max_iters:
                run()
                n += 1
            dt = time.perf_counter() - t0
            r = {"seqs": b, "len": length, "emb_per_s": n * b / dt, "requests": n, "seconds": dt}
            print(f"  {name:22s} {r['emb_per_s']:10.1f} emb/s ({n} requests)", flush=True)
        res["scenarios"][name] = r
        json.dump(res, open(args.out, "w"), indent=1)  # after each: a run cut short keeps its part
    json.dump(res, open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
