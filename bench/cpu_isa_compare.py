#!/usr/bin/env python3
"""Issue 30's same-run CPU comparison, interleaved: Petal's CPU engine (fp32 and bf16, and `auto`
as the engine picks it) against sentence-transformers on PyTorch (fp32, bf16 weights, fp32 weights
under bf16 autocast) and ONNX Runtime (fp32 export, int8 dynamic quantisation), at --threads, on
MiniLM 32 x 128 (throughput) and 1 x 128 (latency). Each round runs every runtime once (A B C ...
A B C ...), so that the load of a shared machine falls on all of them alike; the report takes the
median and the best over the rounds, and records the load average and the cores each run got.
Also: the CPU's model name and ISA flags, and the fidelity of each Petal mode on the golden texts
(worst cosine vs sentence-transformers' goldens and vs Petal's fp32 reference).

  .venv-or-refvenv/bin/python bench/cpu_isa_compare.py --rounds 3 --seconds 4 \
      --out bench/results/<date>-cpu-isa-<sha>.json

Petal runs as `petal_cpu_bench` subprocesses; the baselines in this process (their thread pools
idle between runs). Pinned versions: bench/requirements-cpu.txt.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_baselines as cb  # noqa: E402  (export_onnx, time_runtime)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def loadavg():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def cpu_info():
    model, flags = "unknown", []
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name") and model == "unknown":
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            flags = line.split(":", 1)[1].split()
            break
    isa = sorted(f for f in flags if f.startswith(("avx512", "amx")) or f in ("avx2", "fma", "avx_vnni"))
    return {"model": model, "isa_flags": isa, "logical_cpus": os.cpu_count()}


def petal_run(args, precision, batch, golden=None, bin_dir=None, label=""):
    out = os.path.join(args.work, f"petal-{label}{precision}-{batch}.json")
    cmd = [os.path.join(bin_dir or args.bin, "petal_cpu_bench"), "--model", args.model, "--threads", str(args.threads),
           "--batch", str(batch), "--seq-len", str(args.len), "--seconds", str(args.seconds),
           "--min-batches", "3" if batch > 1 else "20", "--precision", precision, "--warmup", "1",
           "--out", out]
    if golden:
        cmd += ["--golden", golden]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    r = json.load(open(out))
    r["command"] = " ".join(cmd)
    return r


def make_baselines(args):
    """name -> (run(ids) callable, vocab). Built once; ONNX export and quantisation done here."""
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer
    torch.set_num_threads(args.threads)
    runs = {}
    for name, dtype, autocast in [("torch_fp32", torch.float32, False), ("torch_bf16", torch.bfloat16, False),
                                  ("torch_autocast_bf16", torch.float32, True)]:
        m = SentenceTransformer(args.model, device="cpu", model_kwargs={"torch_dtype": dtype}).eval()

        @torch.inference_mode()
        def run(ids, m=m, autocast=autocast):
            t = torch.from_numpy(ids)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                return m({"input_ids": t, "attention_mask": torch.ones_like(t)})["sentence_embedding"].float().numpy()
        runs[name] = run
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic
    fp32_path, int8_path = os.path.join(args.work, "model.onnx"), os.path.join(args.work, "model.int8.onnx")
    cb.export_onnx(args.model, fp32_path)
    quantize_dynamic(fp32_path, int8_path, weight_type=QuantType.QInt8)
    for name, path in [("onnxruntime_fp32", fp32_path), ("onnxruntime_int8", int8_path)]:
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = args.threads, 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        runs[name] = lambda ids, s=sess: s.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0]
    versions = {"torch": torch.__version__, "onnxruntime": ort.__version__,
                "sentence_transformers": __import__("sentence_transformers").__version__}
    return runs, versions


def baseline_run(args, run, vocab):
    import numpy as np
    ns = argparse.Namespace(latency_len=args.len, len=args.len, min_reps=10, seconds=args.seconds,
                            batches=str(args.batch))
    rng = np.random.default_rng(0)
    c0, t0 = time.process_time(), time.perf_counter()
    r = cb.time_runtime(run, vocab, ns, rng)
    r["cpu_cores_used"] = round((time.process_time() - c0) / (time.perf_counter() - t0), 3)
    return {"texts_per_s": r["throughput"][str(args.batch)], "latency_p50_ms": r["latency"]["p50_ms"],
            "cpu_cores_used": r["cpu_cores_used"]}


def summarise(rounds):
    out = {}
    for name in rounds[0]:
        tps = [r[name]["texts_per_s"] for r in rounds]
        lat = [r[name]["latency_p50_ms"] for r in rounds]
        out[name] = {"texts_per_s_median": round(statistics.median(tps), 2), "texts_per_s_best": max(tps),
                     "latency_p50_ms_median": round(statistics.median(lat), 2), "latency_p50_ms_best": min(lat),
                     "rounds_texts_per_s": tps, "rounds_latency_p50_ms": lat}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models/all-MiniLM-L6-v2"))
    ap.add_argument("--golden", default=os.path.join(ROOT, "tests/fixtures/golden_all-MiniLM-L6-v2.json"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/cpu/bin"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--len", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--petal-modes", default="fp32,bf16,auto")
    # A second Petal build in the same rounds (e.g. the commit before a change): LABEL=DIR, its
    # modes in --other-modes; reported as petal_LABEL_<mode>.
    ap.add_argument("--other-bin", default="")
    ap.add_argument("--other-modes", default="bf16")
    ap.add_argument("--work", default="/tmp/petal_cpu_isa")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    sha = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True,
                         text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip())
    res = {"benchmark": "cpu_isa_compare (issue 30)", "git_sha": sha, "git_dirty": dirty,
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpu": cpu_info(),
           "threads": args.threads, "shape": f"{args.batch} x {args.len}", "latency_shape": f"1 x {args.len}",
           "command": " ".join([sys.executable] + sys.argv), "load_average_before": loadavg()}
    print(f"cpu: {res['cpu']['model']}; isa: {' '.join(res['cpu']['isa_flags'])}; load {loadavg()}", flush=True)
    runs, res["versions"] = make_baselines(args)
    vocab = json.load(open(os.path.join(args.model, "config.json")))["vocab_size"]
    modes = [m for m in args.petal_modes.split(",") if m]
    runs_petal = [(f"petal_{m}", m, None, "") for m in modes]
    if args.other_bin:
        label, other = args.other_bin.split("=", 1)
        runs_petal += [(f"petal_{label}_{m}", m, other, label + "-")
                       for m in args.other_modes.split(",") if m]
        res["other_bin"] = args.other_bin
    rounds = []
    for i in range(args.rounds):
        rnd = {}
        for key, m, bin_dir, label in runs_petal:
            t = petal_run(args, m, args.batch, bin_dir=bin_dir, label=label)
            l = petal_run(args, m, 1, bin_dir=bin_dir, label=label)
            rnd[key] = {"texts_per_s": t["texts_per_s"], "latency_p50_ms": l["batch_ms_p50"],
                                 "cpu_cores_used": t["cpu_cores_used"], "engine": t["engine"],
                                 "load": t["load_average_before"]}
            print(f"round {i} {key}: {t['texts_per_s']} texts/s ({t['cpu_cores_used']} cores), "
                  f"1x{args.len} p50 {l['batch_ms_p50']} ms; load {loadavg()}", flush=True)
        for name, run in runs.items():
            time.sleep(0.5)
            rnd[name] = baseline_run(args, run, vocab)
            rnd[name]["load"] = loadavg()
            print(f"round {i} {name}: {rnd[name]}", flush=True)
        rounds.append(rnd)
        res["rounds"] = rounds
        json.dump(res, open(args.out, "w"), indent=1)
    res["summary"] = summarise(rounds)
    s = res["summary"]
    base = {k: s[k]["texts_per_s_median"] for k in s if not k.startswith("petal_")}
    best_bf16_or_ort = max(base.get("torch_bf16", 0), base.get("torch_autocast_bf16", 0),
                           base.get("onnxruntime_fp32", 0))
    res["ratios_median"] = {
        m: {"vs_torch_fp32": round(s[m]["texts_per_s_median"] / base["torch_fp32"], 3),
            "vs_best_of_torch_bf16_ort_fp32": round(s[m]["texts_per_s_median"] / best_bf16_or_ort, 3)}
        for m in s if m.startswith("petal_")}
    # Paired: each round's Petal figure over the same round's baseline (the load moves between
    # rounds more than within one), median over rounds.
    def paired(m, key, inverse=False):
        rs = []
        for r in rounds:
            b = max(r[k][key] if not inverse else 1.0 / r[k][key] for k in key_baselines)
            rs.append((r[m][key] if not inverse else 1.0 / r[m][key]) / b)
        return round(statistics.median(rs), 3)
    res["ratios_paired_median"] = {}
    for m in [k for k in s if k.startswith("petal_")]:
        key_baselines = ["torch_fp32"]
        d = {"vs_torch_fp32": paired(m, "texts_per_s")}
        key_baselines = [k for k in ("torch_bf16", "torch_autocast_bf16", "onnxruntime_fp32") if k in s]
        d["vs_best_of_torch_bf16_ort_fp32"] = paired(m, "texts_per_s")
        d["latency_speedup_vs_best_of_torch_bf16_ort_fp32"] = paired(m, "latency_p50_ms", inverse=True)
        res["ratios_paired_median"][m] = d
    fid = {}
    for m in modes:
        g = petal_run(argparse.Namespace(**{**vars(args), "seconds": 0}), m, 1, golden=args.golden)
        fid[m] = {"worst_cosine_vs_sentence_transformers": g.get("worst_cosine_vs_golden"),
                  "worst_cosine_vs_petal_fp32_reference": g.get("worst_cosine_vs_reference"),
                  "worst_case": g.get("worst_case_vs_golden"), "texts": g.get("golden_cases")}
    res["fidelity_golden_texts"] = fid
    res["load_average_after"] = loadavg()
    json.dump(res, open(args.out, "w"), indent=1)
    print(json.dumps({"summary": {k: {kk: v[kk] for kk in ("texts_per_s_median", "texts_per_s_best",
                                                          "latency_p50_ms_median", "latency_p50_ms_best")}
                                  for k, v in s.items()}, "ratios_median": res["ratios_median"],
                      "ratios_paired_median": res["ratios_paired_median"],
                      "fidelity": fid}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
