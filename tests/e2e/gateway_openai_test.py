#!/usr/bin/env python3
"""End-to-end test of `petal serve` on all-MiniLM-L6-v2 with the official `openai` Python client.

Usage: gateway_openai_test.py PETAL_BIN. Exits 77 (CTest's skip code) if the `openai` package or
the model is missing. Checks: float and base64 results equal the sentence-transformers golden
embeddings (cosine >= 0.99999), `dimensions`, `usage` equal to the token counts, the TEI-style and
scoring routes, the error cases with their status codes, and a clean exit on SIGTERM.
"""
import base64
import json
import math
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

SKIP = 77
SRC = os.environ.get("PETAL_SOURCE_DIR", ".")
MODEL = os.path.join(SRC, "models", "all-MiniLM-L6-v2")


def cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def post(base, path, body, raw=False):
    data = body if raw else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def main():
    try:
        import openai
    except ImportError:
        print("skipped: the openai package is not installed")
        return SKIP
    if not os.path.exists(os.path.join(MODEL, "model.safetensors")):
        print("skipped: %s is missing" % MODEL)
        return SKIP
    golden = json.load(open(os.path.join(SRC, "tests/fixtures/golden_all-MiniLM-L6-v2.json")))["cases"]
    golden = [g for g in golden if not g["truncated"]][:6]
    log = tempfile.NamedTemporaryFile(prefix="gateway_openai_test", suffix=".log", delete=False)
    proc = subprocess.Popen([sys.argv[1], "serve", "--model", MODEL, "--backend", "cpu",
                             "--server-arg=--cpu-precision=fp32",  # fp32 goldens; auto may pick bf16
                             "--listen", "127.0.0.1:0", "--shutdown-grace-ms", "1000"],
                            stderr=log, stdout=subprocess.DEVNULL)
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            print("FAIL:", what)

    try:
        port = None
        for _ in range(600):
            m = re.search(r"gateway listening.* port=(\d+)", open(log.name).read())
            if m:
                port = int(m.group(1))
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        if port is None:
            print(open(log.name).read())
            return 1
        base = "http://127.0.0.1:%d" % port
        # The client's default asks for base64 and decodes it itself.
        client = openai.OpenAI(base_url=base + "/v1", api_key="unused", timeout=30, max_retries=0)
        texts = [g["text"] for g in golden]
        for fmt in ("float", "base64"):
            r = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts, encoding_format=fmt)
            check(len(r.data) == len(texts), "%s: %d rows" % (fmt, len(r.data)))
            for g, d in zip(golden, r.data):
                e = d.embedding
                if isinstance(e, str):  # asked for base64 explicitly: the client leaves it encoded
                    raw = base64.b64decode(e)
                    e = list(struct.unpack("<%df" % (len(raw) // 4), raw))
                check(cos(e, g["embedding"]) >= 0.99999, "%s: golden %s" % (fmt, g["id"]))
            n_tokens = sum(g["n_tokens"] for g in golden)
            check(r.usage.prompt_tokens == n_tokens and r.usage.total_tokens == n_tokens,
                  "usage %s != %d" % (r.usage, n_tokens))
        r = client.embeddings.create(model="x", input=texts)
        check(all(cos(d.embedding, g["embedding"]) >= 0.99999 for g, d in zip(golden, r.data)),
              "default encoding")
        r = client.embeddings.create(model="x", input=texts[0], dimensions=64)
        check(len(r.data[0].embedding) == 64, "dimensions 64")
        check(cos(r.data[0].embedding, golden[0]["embedding"][:64]) >= 0.99999, "dimensions: values")
        check(r.model == "x", "model echoed")
        r = client.embeddings.create(model="x", input=[golden[1]["ids"]])
        check(cos(r.data[0].embedding, golden[1]["embedding"]) >= 0.99999, "token ids")

        s, body = post(base, "/embed", {"inputs": texts[:2]})
        check(s == 200 and len(body) == 2 and cos(body[1], golden[1]["embedding"]) >= 0.99999, "/embed")
        s, body = post(base, "/v1/score", {"query": "What is the capital of France?",
                                            "documents": ["Bananas are yellow.", "Paris is in France."],
                                            "top_k": 2})
        check(s == 200 and [d["index"] for d in body["data"]] == [1, 0], "/v1/score order: %s" % body)

        cases = [
            (b'{"input": ', 400, None, "not valid JSON"),
            (b'{"model": "x"}', 400, "input", "'input' is required"),
            (b'{"input": ["a", 1]}', 400, "input", "input[1]"),
            (b'{"input": "a", "dimensions": 0}', 400, "dimensions", "dimensions"),
            (b'{"input": "a", "encoding_format": "hex"}', 400, "encoding_format", "encoding_format"),
            (json.dumps({"input": ["ok", "word " * 300]}).encode(), 413, "input", "input[1]' has 302 tokens"),
            (json.dumps({"input": ["a"] * 2049}).encode(), 413, "input", "2049"),
        ]
        for body, status, param, text in cases:
            s, resp = post(base, "/v1/embeddings", body, raw=True)
            err = resp.get("error", {})
            check(s == status and err.get("param") == param and text in err.get("message", ""),
                  "error case %r: %d %s" % (body[:40], s, resp))
        try:
            client.embeddings.create(model="x", input="word " * 300)
            check(False, "openai client: no error for an over-long input")
        except openai.APIStatusError as e:
            check(e.status_code == 413, "openai client: status %d" % e.status_code)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = -1
    check(code == 0, "petal serve exit code %s" % code)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
