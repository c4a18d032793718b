#!/usr/bin/env python3
"""HTTP latency with tracing off vs on: `petal bench http` through `petal serve`, alternating runs
without and with `--otlp-endpoint` (a loopback OTLP/HTTP collector in this process that counts the
spans and answers 200), so that drift of a shared machine hits both modes alike.

usage: bench/tracing_overhead.py --petal build/cpu/bin/petal [--backend cpu] [--model DIR]
           [--concurrency 1,4] [--words 64] [--seconds 5] [--rounds 2] [--out FILE]
           [--baseline OTHER_PETAL]   # also time another build (e.g. main's), tracing off: "base"
Writes one JSON (default bench/results/<date>-tracing-<backend>-<sha>.json) with the git SHA, the
machine, every run and, per concurrency, the median over rounds of p50/p99 off and on and the
overhead in percent. Prints a table.
"""
import argparse
import datetime
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "docs"))
from otlp_collector import Collector  # noqa: E402


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        return ""


def machine():
    cpu = ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except Exception:
        pass
    return {"host": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "gpu": sh(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])}


def serve(petal, args, backend, model):
    log = tempfile.NamedTemporaryFile(prefix="tracing_bench_", suffix=".log", delete=False)
    proc = subprocess.Popen([petal, "serve", "--model", model, "--backend", backend, "--listen",
                             "127.0.0.1:0", "--shutdown-grace-ms", "1000", *args],
                            stderr=log, stdout=subprocess.DEVNULL)
    for _ in range(1200):
        m = re.search(r"gateway listening.* port=(\d+)", open(log.name).read())
        if m:
            return proc, int(m.group(1)), log.name
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("petal serve did not start:\n" + open(log.name).read())


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--petal", required=True)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--model", default="models/all-MiniLM-L6-v2")
    ap.add_argument("--concurrency", default="1,4")
    ap.add_argument("--words", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="")
    ap.add_argument("--serve-arg", action="append", default=[], help="extra `petal serve` argument")
    ap.add_argument("--baseline", default="", help="another petal binary to time with tracing off")
    a = ap.parse_args()
    sha = sh(["git", "rev-parse", "--short=10", "HEAD"]) or "unknown"
    dirty = bool(sh(["git", "status", "--porcelain", "--untracked-files=no"]))
    out = a.out or os.path.join("bench", "results", "%s-tracing-%s-%s.json" % (
        datetime.date.today().isoformat(), a.backend, sha))
    collector = Collector(keep=False)
    runs = []
    modes = ("base", "off", "on") if a.baseline else ("off", "on")
    for rnd in range(a.rounds):
        for mode in modes:
            extra = ["--otlp-endpoint", collector.endpoint] if mode == "on" else []
            binary = a.baseline if mode == "base" else a.petal
            proc, port, log = serve(binary, extra + a.serve_arg, a.backend, a.model)
            tmp = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
            spans0 = collector.count()
            try:
                r = subprocess.run([binary, "bench", "http", "--gateway", "127.0.0.1:%d" % port,
                                    "--concurrency", a.concurrency, "--words", str(a.words),
                                    "--seconds", str(a.seconds), "--out", tmp],
                                   capture_output=True, text=True, timeout=600)
                print(r.stdout.strip())
                if r.returncode != 0:
                    raise RuntimeError("petal bench http failed: " + r.stderr)
            finally:
                stop(proc)
            time.sleep(0.7)  # the exporters' last flush
            res = json.load(open(tmp))
            runs.append({"round": rnd, "tracing": mode, "binary_sha": res.get("sha", ""),
                         "spans_exported": collector.count() - spans0,
                         "scenarios": res["scenarios"]})
            print("round %d, tracing %s: %d spans" % (rnd, mode, runs[-1]["spans_exported"]))
    collector.close()
    summary = {}
    for c in a.concurrency.split(","):
        key = "concurrency_" + c
        row = {}
        for mode in modes:
            sc = [r["scenarios"][key] for r in runs if r["tracing"] == mode]
            row[mode] = {m: statistics.median(s[m] for s in sc) for m in ("p50_ms", "p99_ms", "req_per_s")}
        row["p50_overhead_pct"] = 100 * (row["on"]["p50_ms"] / row["off"]["p50_ms"] - 1)
        row["p99_overhead_pct"] = 100 * (row["on"]["p99_ms"] / row["off"]["p99_ms"] - 1)
        if a.baseline:  # this build with tracing off against the other build
            row["off_vs_base_p50_pct"] = 100 * (row["off"]["p50_ms"] / row["base"]["p50_ms"] - 1)
            row["off_vs_base_p99_pct"] = 100 * (row["off"]["p99_ms"] / row["base"]["p99_ms"] - 1)
        summary[key] = row
    doc = {"tool": "bench/tracing_overhead.py", "sha": sha, "dirty": dirty, "machine": machine(),
           "date": datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z",
           "backend": a.backend, "model": a.model, "words": a.words, "seconds": a.seconds,
           "rounds": a.rounds, "serve_args": a.serve_arg, "baseline": a.baseline,
           "baseline_sha": sh([a.baseline, "version"]) if a.baseline else "", "summary": summary, "runs": runs}
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("| concurrency | p50 off ms | p50 on ms | p50 overhead | p99 off ms | p99 on ms | p99 overhead |")
    print("|---|---|---|---|---|---|---|")
    for key, row in summary.items():
        print("| %s | %.3f | %.3f | %+.1f%% | %.3f | %.3f | %+.1f%% |" % (
            key.split("_")[1], row["off"]["p50_ms"], row["on"]["p50_ms"], row["p50_overhead_pct"],
            row["off"]["p99_ms"], row["on"]["p99_ms"], row["p99_overhead_pct"]))
    if a.baseline:
        for key, row in summary.items():
            print("%s: tracing off vs baseline: p50 %+.1f%%, p99 %+.1f%% (base p50 %.3f ms)" % (
                key, row["off_vs_base_p50_pct"], row["off_vs_base_p99_pct"], row["base"]["p50_ms"]))
    print("wrote", out)


if __name__ == "__main__":
    main()
