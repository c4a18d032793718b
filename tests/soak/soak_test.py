#!/usr/bin/env python3
"""Bounded soak test of `petal serve` (CPU engine, all-MiniLM-L6-v2) on loopback.

Usage: soak_test.py PETAL_BIN [--seconds N] [--clients N] [--replicas N] [--out figures.json]
(--seconds defaults to $PETAL_SOAK_SECONDS, else 120). Exits 77 (CTest's skip code) without
the model. Each client thread keeps one HTTP connection and cycles through a fixed request mix:
OpenAI embeddings (one text, a batch, token ids), TEI /embed, /v1/score, /tokenize, plus two
intended errors (an over-long input: 413; a malformed body: 400). Checks:
  * every answer has its expected status, and every embedding is its own input's golden
    sentence-transformers embedding (cosine >= 0.9999), so no answer carries another's data;
  * memory: the summed VmRSS of `petal serve` and its replica processes grows by at most
    --rss-growth-mb (default 64 MiB) between the end of the first third and the end of the run
    (the first third is warm-up: allocator pools, thread stacks, gRPC buffers);
  * latency is stable: the last third's p50 is at most 1.5x the first third's p50 + 10 ms, and
    its p99 at most 2x the first third's p99 + 10 ms (the slack keeps a shared 2-core CI
    machine's scheduling noise from failing the test; a third's p99 alone moves by +-30% there).
Figures (requests, errors, RSS samples, p50/p99 per third) are printed as one JSON object.
"""
import argparse
import http.client
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
SRC = os.environ.get("PETAL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = os.path.join(SRC, "models", "all-MiniLM-L6-v2")


def cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def tree_rss_kib(pid):
    """VmRSS of pid and its direct children (petal serve's replicas), in KiB."""
    pids = [pid]
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                pids += [int(p) for p in f.read().split()]
    except OSError:
        pass
    total = 0
    for p in pids:
        try:
            with open("/proc/%d/status" % p) as f:
                m = re.search(r"VmRSS:\s+(\d+) kB", f.read())
                total += int(m.group(1)) if m else 0
        except OSError:
            pass
    return total


def percentile(xs, q):
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(math.ceil(q * len(xs))) - 1)]


def build_mix(golden):
    """(name, path, body, expected status, checker) tuples; checker(body) -> error or None."""
    g = golden

    def rows_match(rows, cases):
        if len(rows) != len(cases):
            return "%d rows for %d inputs" % (len(rows), len(cases))
        for r, c in zip(rows, cases):
            if cos(r, c["embedding"]) < 0.9999:
                return "row for %s is not its golden embedding" % c["id"]
        return None

    def openai(cases):
        return lambda b: rows_match([d["embedding"] for d in sorted(b["data"], key=lambda d: d["index"])], cases)

    batch = g[1:5]
    return [
        ("openai_one", "/v1/embeddings", {"input": g[0]["text"]}, 200, openai(g[:1])),
        ("openai_batch", "/v1/embeddings", {"input": [c["text"] for c in batch]}, 200, openai(batch)),
        ("openai_ids", "/v1/embeddings", {"input": [g[5]["ids"]]}, 200, openai(g[5:6])),
        ("tei_embed", "/embed", {"inputs": [g[6]["text"], g[7]["text"]]}, 200, lambda b: rows_match(b, g[6:8])),
        ("score", "/v1/score", {"query": g[8]["text"], "documents": [g[8]["text"], g[9]["text"]]}, 200,
         lambda b: None if len(b["data"]) == 2 and abs(max(d["score"] for d in b["data"]) - 1) < 1e-3
         else "score of a text with itself is not 1: %s" % b),
        ("tokenize", "/tokenize", {"inputs": [g[10]["text"]]}, 200,
         lambda b: None if [t["id"] for t in b[0]] == g[10]["ids"] else "tokenize ids differ"),
        ("too_long", "/v1/embeddings", {"input": "word " * 600}, 413, lambda b: None if "error" in b else "no error"),
        ("malformed", "/v1/embeddings", b'{"input": [', 400, lambda b: None if "error" in b else "no error"),
    ]


def client(port, mix, offset, stop, results, problems, lock):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    i = offset
    while not stop.is_set():
        name, path, body, want, check = mix[i % len(mix)]
        i += 1
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        t0 = time.monotonic()
        try:
            conn.request("POST", path, data, {"Content-Type": "application/json"})
            r = conn.getresponse()
            raw = r.read()
            status = r.status
        except (OSError, http.client.HTTPException) as e:
            status, raw = 0, repr(e).encode()
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        dt = time.monotonic() - t0
        err = None
        if status != want:
            err = "%s: status %d, want %d: %s" % (name, status, want, raw[:200])
        else:
            try:
                err = check(json.loads(raw))
            except Exception as e:  # a malformed answer is a failure, not a crash of the test
                err = "%s: %r" % (name, e)
            err = err and "%s: %s" % (name, err)
        with lock:
            results.append((t0, dt, name, status == want and err is None))
            if err and len(problems) < 20:
                problems.append(err)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("petal")
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("PETAL_SOAK_SECONDS", "120")))
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--rss-growth-mb", type=float, default=64)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(MODEL, "model.safetensors")):
        print("skipped: %s is missing" % MODEL)
        return SKIP
    golden = [c for c in json.load(open(os.path.join(SRC, "tests/fixtures/golden_all-MiniLM-L6-v2.json")))["cases"]
              if not c["truncated"]]
    mix = build_mix(golden)
    log = tempfile.NamedTemporaryFile(prefix="soak_test", suffix=".log", delete=False)
    proc = subprocess.Popen([args.petal, "serve", "--model", MODEL, "--backend", "cpu", "--replicas",
                             str(args.replicas), "--listen", "127.0.0.1:0", "--shutdown-grace-ms", "2000"],
                            stderr=log, stdout=subprocess.DEVNULL)
    failures = []
    figures = {}
    try:
        port = None
        for _ in range(1200):
            m = re.search(r"gateway listening.* port=(\d+)", open(log.name).read())
            if m:
                port = int(m.group(1))
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        if port is None:
            print(open(log.name).read()[-3000:])
            return 1
        stop = threading.Event()
        results, problems, lock = [], [], threading.Lock()
        threads = [threading.Thread(target=client, args=(port, mix, k * 3, stop, results, problems, lock))
                   for k in range(args.clients)]
        start = time.monotonic()
        for t in threads:
            t.start()
        rss = []  # (seconds since start, KiB)
        while time.monotonic() - start < args.seconds:
            rss.append((time.monotonic() - start, tree_rss_kib(proc.pid)))
            time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
        third = args.seconds / 3
        lat = {k: [dt for t0, dt, _, _ in results if k * third <= t0 - start < (k + 1) * third] for k in range(3)}
        rss_warm = [kb for s, kb in rss if s >= third]
        growth_mb = (rss[-1][1] - rss_warm[0]) / 1024 if rss_warm else 0
        bad = sum(1 for r in results if not r[3])
        figures = {
            "seconds": round(elapsed, 1), "clients": args.clients, "replicas": args.replicas,
            "requests": len(results), "requests_per_s": round(len(results) / elapsed, 1),
            "unexpected": bad, "intended_errors": sum(1 for r in results if r[2] in ("too_long", "malformed")),
            "rss_mib_start": round(rss[0][1] / 1024, 1), "rss_mib_after_warmup": round(rss_warm[0] / 1024, 1) if rss_warm else None,
            "rss_mib_end": round(rss[-1][1] / 1024, 1), "rss_mib_max": round(max(kb for _, kb in rss) / 1024, 1),
            "rss_growth_mib_after_warmup": round(growth_mb, 1),
            "p50_ms_by_third": [round(1000 * percentile(lat[k], 0.5), 1) for k in range(3)],
            "p99_ms_by_third": [round(1000 * percentile(lat[k], 0.99), 1) for k in range(3)],
        }
        if bad:
            failures.append("%d unexpected answers, e.g. %s" % (bad, problems[:5]))
        if len(results) < args.clients:
            failures.append("only %d requests completed" % len(results))
        if growth_mb > args.rss_growth_mb:
            failures.append("RSS grew %.1f MiB after warm-up (bound %.0f)" % (growth_mb, args.rss_growth_mb))
        # Drift: the median must not climb by half, the tail not double. A third's p99 is its ~1%
        # slowest answers, which move by +-30% between thirds on a loaded 2-core host with no
        # drift at all (session 27: 82 -> 136 ms in one run, 123 -> 83 ms in the next).
        p50_first, p50_last = percentile(lat[0], 0.5), percentile(lat[2], 0.5)
        if p50_last > 1.5 * p50_first + 0.010:
            failures.append("p50 drifted: last third %.1f ms vs first third %.1f ms" % (1000 * p50_last, 1000 * p50_first))
        p99_first, p99_last = percentile(lat[0], 0.99), percentile(lat[2], 0.99)
        if p99_last > 2.0 * p99_first + 0.010:
            failures.append("p99 drifted: last third %.1f ms vs first third %.1f ms" % (1000 * p99_last, 1000 * p99_first))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = -1
    if code != 0:
        failures.append("petal serve exit code %s" % code)
    figures["failures"] = failures
    print(json.dumps(figures, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(figures, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
