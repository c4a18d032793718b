#!/usr/bin/env python3
"""Merges the per-tool results of one bench/run_gpu.sh run into one JSON (stdlib only: it runs on
the GPU machine too). Reads, from --dir: accuracy.json, petal_engine.json, petal_grpc.json,
petal_grpc_busypoll.json, petal_http.json, hf.json, st.json, steps.tsv (each optional), and writes <date>-<sha>.json
(GPU) or <date>-<sha>-cpu.json (--mode cpu) there; its path goes to merged_path.txt. With --fp8-dir
(bench/run_gpu.sh's fp8 part, or a scripts/gpu/steps/fp8_calib.sh run's folder) the merged JSON
also holds "fp8": engine-<shape>-<variant>.json, fidelity-<model>.json and each
calib-<shape>/fp8_scales.json's model and calibration blocks.

The SHA is the one compiled into the petal binary that was measured (the bench tools write it),
else the bundle's MANIFEST.json, else `git rev-parse`; the machine is nvidia-smi's name and
driver (GPU) and the CPU model and core count.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess


def load(d, name):
    p = os.path.join(d, name)
    if not os.path.exists(p):
        return None
    try:
        return json.load(open(p))
    except ValueError as e:
        return {"error": f"unreadable {name}: {e}"}


def load_fp8(d):
    """The fp8 results of one folder (see the module doc), or None if it holds none."""
    if not d or not os.path.isdir(d):
        return None
    out = {"dir": d, "engine": {}, "fidelity": {}, "calibration": {}}
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if name.startswith("engine-") and name.endswith(".json"):
            out["engine"][name[len("engine-"):-len(".json")]] = load(d, name)
        elif name.startswith("fidelity-") and name.endswith(".json"):
            out["fidelity"][name[len("fidelity-"):-len(".json")]] = load(d, name)
        elif name.startswith("calib-") and os.path.exists(os.path.join(p, "fp8_scales.json")):
            j = load(p, "fp8_scales.json") or {}
            out["calibration"][name[len("calib-"):]] = {k: j.get(k) for k in ("version", "model", "calibration")}
    return out if any(out[k] for k in ("engine", "fidelity", "calibration")) else None


def run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def find_sha(parts, root):
    for p in parts:
        if isinstance(p, dict) and p.get("sha") and p["sha"] != "unknown":
            return p["sha"], "petal binary"
    man = os.path.join(root, ".gpu_bundle", "MANIFEST.json")
    if os.path.exists(man):
        m = json.load(open(man))
        if m.get("git_commit"):
            return m["git_commit"] + ("-dirty" if m.get("git_dirty") else ""), "bundle manifest"
    sha = run(["git", "-C", root, "rev-parse", "HEAD"])
    return (sha or "unknown"), "git"


def machine(mode):
    m = {"cpu_cores": os.cpu_count(), "os": platform.platform()}
    try:  # other work on the machine skews CPU figures: say how busy it was
        m["loadavg_1_5_15"] = [float(x) for x in open("/proc/loadavg").read().split()[:3]]
    except (OSError, ValueError):
        pass
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                m["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    if mode == "gpu":
        smi = run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                   "--format=csv,noheader"])
        rows = [r.split(", ") for r in smi.splitlines() if r.strip()]
        if rows:
            m["gpu"] = rows[0][0]
            m["driver"] = rows[0][1] if len(rows[0]) > 1 else ""
            m["gpu_memory"] = rows[0][2] if len(rows[0]) > 2 else ""
            m["gpu_count"] = len(rows)
        m["cuda_runtime"] = run(["bash", "-c", "nvcc --version 2>/dev/null | tail -1"])
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--mode", choices=["gpu", "cpu"], required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--model-name", required=True)
    ap.add_argument("--petal", default="petal")
    ap.add_argument("--command", required=True)
    ap.add_argument("--seconds-per-scenario", type=float)
    ap.add_argument("--fp8-dir", help="fp8 results folder (engine-*.json, fidelity-*.json, calib-*/)")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    d = a.dir
    parts = {k: load(d, f) for k, f in [
        ("accuracy", "accuracy.json"), ("petal_engine", "petal_engine.json"),
        ("petal_grpc", "petal_grpc.json"), ("petal_grpc_busypoll", "petal_grpc_busypoll.json"),
        ("petal_http", "petal_http.json"),
        ("hf", "hf.json"), ("sentence_transformers", "st.json")]}
    steps = {}
    if os.path.exists(os.path.join(d, "steps.tsv")):
        for line in open(os.path.join(d, "steps.tsv")):
            f = line.rstrip("\n").split("\t")
            if len(f) >= 3:
                steps[f[0]] = {"status": f[1], "seconds": int(f[2]), "note": f[3] if len(f) > 3 else ""}
    sha, sha_from = find_sha([parts["petal_engine"], parts["petal_grpc"], parts["petal_http"]], root)
    now = datetime.datetime.now(datetime.timezone.utc)
    merged = {
        "report_schema": 1,
        "mode": a.mode,
        "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sha": sha,
        "sha_from": sha_from,
        "command": a.command,
        "machine": machine(a.mode),
        "model": {"name": a.model_name, "path": a.model},
        "petal_version": run([a.petal, "version"]),
        "seconds_per_scenario": a.seconds_per_scenario,
        "steps": steps,
        **parts,
    }
    fp8 = load_fp8(a.fp8_dir)
    if fp8:
        fp8["dir"] = os.path.relpath(a.fp8_dir, d) + " (beside the merged file)"
        merged["fp8"] = fp8
    name = f"{now.strftime('%Y-%m-%d')}-{sha[:10]}{'-cpu' if a.mode == 'cpu' else ''}.json"
    path = os.path.join(d, name)
    json.dump(merged, open(path, "w"), indent=1)
    open(os.path.join(d, "merged_path.txt"), "w").write(path)
    print(f"merged {len([p for p in parts.values() if p])} result files into {path}")


if __name__ == "__main__":
    main()
