#!/usr/bin/env python3
"""`petal embed --input/--output` on the CPU engine with MiniLM (small files, a few seconds each).

Checks: JSONL -> Parquet and Parquet -> .npy round trips against plain `petal embed` (the same
engine, one text per line; tolerance 1e-5 absolute); kill -9 mid-run + --resume gives every id
exactly once and vectors equal (1e-6) to an uninterrupted run (Parquet float32 and .npy int8); --shard I/N covers the input
exactly once; bad rows (missing text, null text, past the model length, missing column) are
skipped or fail per --on-error and are reported with their id. Usage: embed_dataset_test.py PETAL.
Exit 77 (skipped) without the MiniLM files or pyarrow.
"""
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:
    print("SKIP: numpy/pyarrow not installed (scripts/requirements.txt)")
    sys.exit(77)

PETAL = os.path.abspath(sys.argv[1])
SRC = os.environ.get("PETAL_SOURCE_DIR", os.getcwd())
MODEL = os.path.join(SRC, "models", "all-MiniLM-L6-v2")
if not os.path.exists(os.path.join(MODEL, "model.safetensors")):
    print("SKIP: models/all-MiniLM-L6-v2 is not there")
    sys.exit(77)
ENV = dict(os.environ, PETAL_PYTHON=sys.executable)
WORDS = "the cat sat on a warm mat while rain fell over quiet hills and rivers".split()
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def text(i):
    return " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(3 + i % 9)) + f" {i}"


def embed(*args, check_rc=True):
    cmd = [PETAL, "embed", "--model", MODEL, "--backend", "cpu", "--no-progress", *args]
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)
    if check_rc and p.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)}\n{p.stderr}")
    return p


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def parquet_rows(path):
    t = pq.read_table(path)
    return t.column("id").to_pylist(), np.array(t.column("embedding").to_pylist(), np.float32)


def main():
    tmp = tempfile.mkdtemp(prefix="petal_embed_ds_")
    atexit.register(shutil.rmtree, tmp, True)  # ignore_errors
    n = 60
    rows = [{"id": f"doc-{i}", "text": text(i)} for i in range(n)]
    src = os.path.join(tmp, "in.jsonl")
    write_jsonl(src, rows)

    # Reference: plain `petal embed`, one JSON text per line on stdin.
    p = subprocess.run([PETAL, "embed", "--model", MODEL, "--backend", "cpu"], env=ENV,
                       input="".join(json.dumps(r["text"]) + "\n" for r in rows),
                       capture_output=True, text=True, timeout=300, check=True)
    ref = np.array([json.loads(line) for line in p.stdout.splitlines()], np.float32)

    # JSONL -> Parquet.
    out = os.path.join(tmp, "out.parquet")
    embed("--input", src, "--output", out, "--rows-per-part", "25", "--batch-rows", "8")
    ids, emb = parquet_rows(out)
    check(ids == [r["id"] for r in rows], "jsonl->parquet: ids in input order")
    check(emb.shape == (n, 384) and np.abs(emb - ref).max() < 1e-5,
          f"jsonl->parquet: vectors equal plain petal embed (max diff {np.abs(emb - ref).max():.2e})")
    meta = json.loads(pq.ParquetFile(out).schema_arrow.metadata[b"petal"])
    check(meta["model"] == "all-MiniLM-L6-v2" and meta["options"]["dtype"] == "float32",
          "parquet metadata names the model and options")
    check(not os.path.exists(out + ".parts"), "parts folder removed at the end")

    # Parquet (integer ids) -> .npy + ids, and float16 / int8 Parquet.
    pin = os.path.join(tmp, "in.parquet")
    pq.write_table(pa.table({"key": list(range(n)), "body": [r["text"] for r in rows]}), pin,
                   row_group_size=17)
    npy = os.path.join(tmp, "out.npy")
    embed("--input", pin, "--output", npy, "--text-field", "body", "--id-field", "key")
    arr = np.load(npy)
    npy_ids = [json.loads(line) for line in open(os.path.join(tmp, "out.ids.jsonl"))]
    check(npy_ids == [str(i) for i in range(n)], "parquet->npy: ids")
    check(arr.shape == (n, 384) and np.abs(arr - ref).max() < 1e-5, "parquet->npy: vectors")
    f16 = os.path.join(tmp, "f16.parquet")
    embed("--input", pin, "--output", f16, "--text-field", "body", "--id-field", "key",
          "--dtype", "float16")
    _, e16 = parquet_rows(f16)
    check(pq.read_schema(f16).field("embedding").type.value_type == pa.float16() and
          np.abs(e16 - ref).max() < 2e-3, "float16 output")
    i8 = os.path.join(tmp, "i8.parquet")
    embed("--input", src, "--output", i8, "--dtype", "int8")
    t8 = pq.read_table(i8)
    deq = np.array(t8.column("embedding").to_pylist(), np.float32) * \
        np.array(t8.column("scale").to_pylist(), np.float32)[:, None]
    check(np.abs(deq - ref).max() < 0.01, "int8 output with per-row scale")

    # --server: the same rows through a `petal server` (the gateway's balancing and flow control).
    # A Unix socket in this run's folder: a TCP port picked here could be taken by another test
    # before the server binds it.
    addr = "unix:" + os.path.join(tmp, "server.sock")
    srv_log = open(os.path.join(tmp, "server.log"), "w")
    srv = subprocess.Popen([PETAL, "server", "--model", MODEL, "--backend", "cpu",
                            "--listen", addr, "--max-queue-tokens", "2000"],
                           env=ENV, stderr=srv_log)
    try:
        remote = os.path.join(tmp, "remote.parquet")
        # It waits (up to a minute) for the server to load.
        p = embed("--input", src, "--output", remote, "--server", addr,
                  check_rc=False)
        if p.returncode != 0 or not os.path.exists(remote):
            srv_log.flush()
            print(f"FAIL --server run exited {p.returncode}:\n{p.stderr}\nserver:\n"
                  + open(srv_log.name).read())
            failures.append("--server run")
            return 1
        rids, remb = parquet_rows(remote)
        check(p.returncode == 0 and rids == ids and np.abs(remb - ref).max() < 1e-5,
              "--server (a small server queue bound): same ids and vectors")
    finally:
        srv.terminate()
        srv.wait()

    # kill -9 mid-run, then --resume: every id exactly once, vectors as uninterrupted; for
    # Parquet float32 and for .npy int8 (ids and scales files too).
    big = [{"id": f"r{i}", "text": text(i)} for i in range(150)]
    bsrc = os.path.join(tmp, "big.jsonl")
    write_jsonl(bsrc, big)
    common = ["--rows-per-part", "20", "--batch-rows", "4", "--threads", "1"]
    for ext, extra in (("parquet", []), ("npy", ["--dtype", "int8"])):
        full = os.path.join(tmp, f"full.{ext}")
        embed("--input", bsrc, "--output", full, *common, *extra)
        res = os.path.join(tmp, f"resumed.{ext}")
        cmd = [PETAL, "embed", "--model", MODEL, "--backend", "cpu", "--no-progress",
               "--input", bsrc, "--output", res, *common, *extra]
        proc = subprocess.Popen(cmd, env=ENV, stderr=subprocess.DEVNULL)
        manifest = res + ".parts/manifest.json"
        deadline = time.time() + 120
        killed_after = 0
        while time.time() < deadline and proc.poll() is None:
            try:
                killed_after = len(json.load(open(manifest))["parts"])
            except (OSError, ValueError):
                killed_after = 0
            if killed_after >= 2:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.02)
        proc.wait()
        check(proc.returncode == -signal.SIGKILL and not os.path.exists(res),
              f"{ext}: killed with -9 after {killed_after} parts, before the end")
        embed("--input", bsrc, "--output", res, *common, *extra, "--resume")
        if ext == "parquet":
            rids, remb = parquet_rows(res)
            fids, femb = parquet_rows(full)
        else:
            stem = lambda p: p[:-4]
            rids = [json.loads(x) for x in open(stem(res) + ".ids.jsonl")]
            fids = [json.loads(x) for x in open(stem(full) + ".ids.jsonl")]
            remb = np.load(res) * np.load(stem(res) + ".scales.npy")[:, None]
            femb = np.load(full) * np.load(stem(full) + ".scales.npy")[:, None]
        check(sorted(rids) == sorted(r["id"] for r in big) and len(set(rids)) == len(rids),
              f"{ext}: resume: every id exactly once")
        check(rids == fids and remb.shape == femb.shape and np.abs(remb - femb).max() < 1e-6,
              f"{ext}: resume: equal to uninterrupted run")
    p = embed("--input", bsrc, "--output", os.path.join(tmp, "full.parquet"), *common,
              check_rc=False)
    check(p.returncode == 0, "a finished output can be written again")

    # --fake-engine: the host path alone, every row written, unit vectors.
    fake = os.path.join(tmp, "fake.parquet")
    p = embed("--input", bsrc, "--output", fake, "--fake-engine", check_rc=False)
    fids, femb = parquet_rows(fake) if p.returncode == 0 else ([], np.zeros((0, 384)))
    check(p.returncode == 0 and fids == [r["id"] for r in big] and
          np.allclose(np.linalg.norm(femb, axis=1), 1, atol=1e-5), "--fake-engine writes every row")

    # Shards cover the input exactly once.
    seen = []
    for i in range(3):
        sp = os.path.join(tmp, f"shard{i}.parquet")
        embed("--input", src, "--output", sp, "--shard", f"{i}/3")
        seen += parquet_rows(sp)[0]
    check(sorted(seen) == sorted(r["id"] for r in rows) and len(seen) == n,
          "--shard 0/3, 1/3, 2/3 cover every row once")

    # Parquet shards across row-group boundaries (groups of 37 rows, batches of 10, 7 shards).
    odd = os.path.join(tmp, "odd.parquet")
    pq.write_table(pa.table({"id": [f"k{i}" for i in range(400)],
                             "text": [text(i) for i in range(400)]}), odd, row_group_size=37)
    seen = []
    for i in range(7):
        sp = os.path.join(tmp, f"odd{i}.parquet")
        embed("--input", odd, "--output", sp, "--shard", f"{i}/7", "--batch-rows", "10",
              "--fake-engine")
        seen += parquet_rows(sp)[0]
    check(seen == [f"k{i}" for i in range(400)], "parquet shards across row groups: in order, once")

    # Bad rows: missing text, null text, past the model length (256 tokens).
    bad = [{"id": "a", "text": "fine"}, {"id": "no-text"}, {"id": "null-text", "text": None},
           {"id": "too-long", "text": "word " * 400}, {"id": "b", "text": "also fine"}]
    bsrc2 = os.path.join(tmp, "bad.jsonl")
    write_jsonl(bsrc2, bad)
    skip = os.path.join(tmp, "skip.parquet")
    p = embed("--input", bsrc2, "--output", skip, "--on-error", "skip", check_rc=False)
    check(p.returncode == 0 and parquet_rows(skip)[0] == ["a", "b"], "--on-error skip keeps good rows")
    check(all(f'"{i}"' in p.stderr for i in ("no-text", "null-text", "too-long")),
          "--on-error skip reports each bad row's id")
    failed = os.path.join(tmp, "fail.parquet")
    p = embed("--input", bsrc2, "--output", failed, check_rc=False)
    check(p.returncode == 1 and '"no-text"' in p.stderr and not os.path.exists(failed),
          "--on-error fail (default) stops at the first bad row, named")
    trunc = os.path.join(tmp, "trunc.parquet")
    p = embed("--input", bsrc2, "--output", trunc, "--on-error", "skip", "--truncate",
              check_rc=False)
    check(parquet_rows(trunc)[0] == ["a", "too-long", "b"], "--truncate embeds the long text")
    pq.write_table(pa.table({"id": ["x", "y"], "body": ["p", None]}), os.path.join(tmp, "b.parquet"))
    p = embed("--input", os.path.join(tmp, "b.parquet"), "--output", os.path.join(tmp, "c.parquet"),
              check_rc=False)
    check(p.returncode != 0 and "no column 'text'" in p.stderr, "parquet: missing column named")
    p = embed("--input", os.path.join(tmp, "b.parquet"), "--output", os.path.join(tmp, "d.parquet"),
              "--text-field", "body", "--on-error", "skip", check_rc=False)
    check(p.returncode == 0 and '"y"' in p.stderr and parquet_rows(os.path.join(tmp, "d.parquet"))[0]
          == ["x"], "parquet: null text skipped and reported")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
