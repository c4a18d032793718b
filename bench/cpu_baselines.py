#!/usr/bin/env python3
"""CPU baselines for `bench/cpu_baselines.sh`: sentence-transformers on PyTorch CPU (fp32, bf16) and
ONNX Runtime (an ONNX export of the same model in fp32 and its int8 dynamic quantisation).

Every runtime is timed on the same shapes as `petal_cpu_bench` (random token ids of an exact
length, no tokenization in the timed region, embeddings pooled and returned on the host):
  latency   one text of --latency-len tokens at a time: p50 / p90 ms
  throughput texts of --len tokens in back-to-back batches, at each of --batches; the best
            batch size is reported as best_texts_per_s (each runtime at its best batch size)
The thread count is --threads for all (torch.set_num_threads, ORT intra_op_num_threads).
--runtimes: torch_fp32, torch_bf16 (bf16 weights), torch_autocast (fp32 weights under bf16 autocast),
onnxruntime (fp32 and int8), onnxruntime_fp32, onnxruntime_int8.
transformers' Qwen3 attends causally whatever the config says: compare its timings with Petal's
on a causal checkpoint (`petal make-model --attention causal`; bench/cpu_baselines.sh does).
Writes JSON to --out. A runtime that is not installed is recorded as skipped.
Pinned versions: bench/requirements-cpu.txt.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def time_runtime(run, vocab, args, rng):
    """Latency at 1 x latency_len and throughput per batch size for `run(ids[int64 B,L]) -> emb`."""
    import numpy as np
    out = {}
    if args.latency_len > 0:
        ids = rng.integers(min(1000, vocab // 2), vocab - 1, size=(1, args.latency_len), dtype=np.int64)
        for _ in range(min(3, args.min_reps)):
            run(ids)
        ts, t_end = [], time.perf_counter() + args.seconds
        while (time.perf_counter() < t_end or len(ts) < max(3, args.min_reps)) and len(ts) < 2000:
            t0 = time.perf_counter()
            run(ids)
            ts.append((time.perf_counter() - t0) * 1e3)
        out["latency"] = {"len": args.latency_len, "p50_ms": round(pct(ts, 50), 3),
                          "p90_ms": round(pct(ts, 90), 3), "n": len(ts)}
    out["throughput"] = {}
    best = (0.0, 0)
    for b in [int(x) for x in args.batches.split(",") if x]:
        ids = rng.integers(min(1000, vocab // 2), vocab - 1, size=(b, args.len), dtype=np.int64)
        run(ids)
        n, t0, c0 = 0, time.perf_counter(), time.process_time()
        while (time.perf_counter() - t0 < args.seconds or n < max(1, args.min_reps // 5)) and n < 500:
            run(ids)
            n += 1
        tps = n * b / (time.perf_counter() - t0)
        out["throughput"][str(b)] = round(tps, 2)
        # On a shared machine the threads may get less than `threads` cores; CPU time says how much.
        out.setdefault("texts_per_cpu_s", {})[str(b)] = round(n * b / (time.process_time() - c0), 2)
        best = max(best, (tps, b))
    if best[1]:
        out["best_texts_per_s"], out["best_batch"] = round(best[0], 2), best[1]
    print(f"    latency {out.get('latency')}; throughput {out['throughput']} texts/s; "
          f"per CPU-second {out.get('texts_per_cpu_s')}", flush=True)
    return out


def torch_baseline(args, dtype_name, rng):
    import torch
    import sentence_transformers
    from sentence_transformers import SentenceTransformer
    torch.set_num_threads(args.threads)
    dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
    autocast = dtype_name == "autocast"
    model = SentenceTransformer(args.model, device="cpu", model_kwargs={"torch_dtype": dtype})
    model.eval()
    vocab = model[0].auto_model.config.vocab_size

    @torch.inference_mode()
    def run(ids):
        t = torch.from_numpy(ids)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            return model({"input_ids": t, "attention_mask": torch.ones_like(t)})[
                "sentence_embedding"].float().numpy()

    res = {"engine": "sentence-transformers", "version": sentence_transformers.__version__,
           "torch": torch.__version__, "dtype": dtype_name, "threads": torch.get_num_threads()}
    res.update(time_runtime(run, vocab, args, rng))
    return res


def export_onnx(model_dir, path):
    """Exports the model's encoder + mean pooling + L2 normalisation to `path` (opset 17)."""
    import torch
    from transformers import AutoModel

    class Wrapped(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            h = self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(h.dtype)
            pooled = (h * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=-1)

    m = Wrapped(AutoModel.from_pretrained(model_dir, torch_dtype=torch.float32).eval())
    ids = torch.ones((2, 16), dtype=torch.int64)
    torch.onnx.export(m, (ids, torch.ones_like(ids)), path, input_names=["input_ids", "attention_mask"],
                      output_names=["embedding"], opset_version=17, dynamo=False,
                      dynamic_axes={"input_ids": {0: "b", 1: "l"}, "attention_mask": {0: "b", 1: "l"},
                                    "embedding": {0: "b"}})


def ort_baselines(args, rng, variants=("fp32", "int8")):
    import onnxruntime as ort
    import numpy as np
    from onnxruntime.quantization import QuantType, quantize_dynamic
    cfg = json.load(open(os.path.join(args.model, "config.json")))
    work = tempfile.mkdtemp(prefix="petal_onnx_")
    fp32_path, int8_path = os.path.join(work, "model.onnx"), os.path.join(work, "model.int8.onnx")
    export_onnx(args.model, fp32_path)
    big = sum(os.path.getsize(os.path.join(work, f)) for f in os.listdir(work)) > (1 << 31) - (1 << 27)
    if "int8" in variants:
        quantize_dynamic(fp32_path, int8_path, weight_type=QuantType.QInt8,
                         use_external_data_format=big)
    out = {}
    for name, path in [(v, fp32_path if v == "fp32" else int8_path) for v in variants]:
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

        def run(ids, sess=sess):
            return sess.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0]

        print(f"  onnxruntime {name}", flush=True)
        res = {"engine": "onnxruntime", "version": ort.__version__, "dtype": name,
               "quantisation": "quantize_dynamic QInt8 weights" if name == "int8" else "none",
               "threads": args.threads}
        res.update(time_runtime(run, cfg["vocab_size"], args, rng))
        out[f"onnxruntime_{name}"] = res
        del sess
    shutil.rmtree(work, ignore_errors=True)  # the 0.6b shape's export is 2.3 GB
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="sentence-transformers model folder")
    ap.add_argument("--assemble-from", help="HF checkpoint to wrap into --model first (as "
                    "bench/baselines/sentence_transformers_bench.py does)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--len", type=int, default=128, help="tokens per text (throughput)")
    ap.add_argument("--latency-len", type=int, default=128, help="0: no latency measurement")
    ap.add_argument("--batches", default="8,16,32,64", help="throughput batch sizes tried ('': none)")
    ap.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    ap.add_argument("--min-reps", type=int, default=10,
                    help="latency: at least this many timed runs (warm-up min(3, N)); throughput: "
                    "at least N / 5 timed batches (1 warm-up); big shapes pass 1-3")
    ap.add_argument("--runtimes", default=os.environ.get("PETAL_BENCH_RUNTIMES",
                                                        "torch_fp32,torch_bf16,torch_autocast,onnxruntime"))
    args = ap.parse_args()
    import numpy as np
    if args.assemble_from:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "baselines"))
        from sentence_transformers_bench import assemble
        assemble(args.assemble_from, args.model)
    res = {"model": args.model, "threads": args.threads, "len": args.len,
           "load_average_before": open("/proc/loadavg").read().split()[:3], "baselines": {}}
    for rt in args.runtimes.split(","):
        rng = np.random.default_rng(0)
        print(f"  {rt}", flush=True)
        try:
            if rt.startswith("torch_"):
                res["baselines"][rt] = torch_baseline(args, rt.split("_")[1], rng)
            elif rt == "onnxruntime":
                res["baselines"].update(ort_baselines(args, rng))
            elif rt.startswith("onnxruntime_"):  # one variant: onnxruntime_fp32 | onnxruntime_int8
                res["baselines"].update(ort_baselines(args, rng, (rt.split("_")[1],)))
        except Exception as e:  # a runtime missing or failing is recorded, the rest still run
            res["baselines"][rt] = {"skipped": f"{type(e).__name__}: {e}"}
            print(f"    skipped: {e}", flush=True)
        json.dump(res, open(args.out, "w"), indent=1)
    res["load_average_after"] = open("/proc/loadavg").read().split()[:3]
    json.dump(res, open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
