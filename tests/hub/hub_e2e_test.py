#!/usr/bin/env python3
"""End-to-end test of models by hub id against tests/hub/fake_hub.py on loopback (no network).

Usage: hub_e2e_test.py PETAL_BIN [--python-crosscheck]
Serves the real all-MiniLM-L6-v2 files (models/all-MiniLM-L6-v2, linked at test time, never
committed) as the hub repo sentence-transformers/all-MiniLM-L6-v2, then on a fresh cache:
  1. `petal embed --model ORG/NAME` downloads once and prints the same bytes as the local folder;
  2. `petal serve --model ORG/NAME` on another fresh cache downloads, serves (the response names
     ORG/NAME), and a restart with HF_HUB_OFFLINE=1 and the hub stopped serves from the cache;
  3. a missing id offline, a bad id and a bad revision fail with their messages.
With --python-crosscheck (exits 77 when huggingface_hub is not installed): the cache Petal fills
is found by huggingface_hub's snapshot_download(local_files_only=True), and a cache that
snapshot_download fills is used by Petal offline, and online without a download.
Exits 77 when the model folder is missing.
"""
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77
SRC = os.environ.get("PETAL_SOURCE_DIR", ".")
MODEL = os.path.join(SRC, "models", "all-MiniLM-L6-v2")
REPO = "sentence-transformers/all-MiniLM-L6-v2"
# What Petal fetches of that repo (hub.IsModelFile), as allow_patterns for huggingface_hub.
PATTERNS = ["config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
            "vocab.txt", "modules.json", "config_sentence_transformers.json",
            "sentence_bert_config.json", "*.safetensors", "1_Pooling/config.json"]
FAILURES = []


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


class FakeHub:
    def __init__(self, root, workdir):
        self.port_file = os.path.join(workdir, "hub.port")
        if os.path.exists(self.port_file):
            os.remove(self.port_file)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(SRC, "tests/hub/fake_hub.py"), "--root", root,
             "--port-file", self.port_file], stdout=subprocess.DEVNULL)
        for _ in range(200):
            if os.path.exists(self.port_file):
                break
            time.sleep(0.05)
        self.url = "http://127.0.0.1:%s" % open(self.port_file).read()

    def log(self, clear=True):
        with urllib.request.urlopen(self.url + "/_log" + ("?clear=1" if clear else "")) as r:
            return json.loads(r.read())

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def blob_gets(log):
    return [e for e in log if e["method"] == "GET" and "/_cdn/" in e["path"]]


def env_with(cache, endpoint=None, offline=False):
    env = dict(os.environ, HF_HUB_CACHE=cache, HF_HUB_DISABLE_PROGRESS_BARS="1")
    env.pop("HF_TOKEN", None)
    env["HF_TOKEN_PATH"] = os.path.join(cache, "no-token")
    if endpoint:
        env["HF_ENDPOINT"] = endpoint
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    else:
        env.pop("HF_HUB_OFFLINE", None)
    return env


def embed(petal, model, env):
    return subprocess.run([petal, "embed", "--backend", "cpu", "--model", model, "Hello, world",
                           "Models by hub id"], env=env, capture_output=True, text=True,
                          timeout=120)


def post(base, body):
    req = urllib.request.Request(base + "/v1/embeddings", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def serve_and_embed(petal, env, logpath):
    """Starts `petal serve --model REPO`, embeds one text, stops it. Returns (model, vector)."""
    with open(logpath, "w") as log:
        proc = subprocess.Popen([petal, "serve", "--model", REPO, "--backend", "cpu", "--listen",
                                 "127.0.0.1:0", "--shutdown-grace-ms", "500"], env=env,
                                stderr=log, stdout=subprocess.DEVNULL)
    try:
        port = None
        for _ in range(900):
            m = re.search(r"gateway listening.* port=(\d+)", open(logpath).read())
            if m:
                port = int(m.group(1))
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        if port is None:
            print(open(logpath).read())
            return None, None
        out = post("http://127.0.0.1:%d" % port, {"input": "Hello, world"})
        return out["model"], out["data"][0]["embedding"]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def main():
    petal = sys.argv[1]
    crosscheck = "--python-crosscheck" in sys.argv
    if not os.path.exists(os.path.join(MODEL, "model.safetensors")):
        print("skipped: %s is missing" % MODEL)
        return SKIP
    if crosscheck:
        try:
            import huggingface_hub  # noqa: F401
        except ImportError:
            print("skipped: huggingface_hub is not installed (scripts/requirements.txt pins it)")
            return SKIP
    work = tempfile.mkdtemp(prefix="hub_e2e_test")
    try:
        # The hub repo: links to the real model files (README, data_config.json and the rest too:
        # Petal must leave out what the model does not need).
        repo = os.path.join(work, "root", REPO)
        for base, _, names in os.walk(os.path.realpath(MODEL)):
            for n in names:
                rel = os.path.relpath(os.path.join(base, n), os.path.realpath(MODEL))
                if rel.startswith("."):
                    continue
                os.makedirs(os.path.dirname(os.path.join(repo, rel)), exist_ok=True)
                os.symlink(os.path.join(base, n), os.path.join(repo, rel))
        hub = FakeHub(os.path.join(work, "root"), work)
        try:
            ref = embed(petal, MODEL, env_with(os.path.join(work, "unused")))
            check(ref.returncode == 0, "petal embed on the local folder")
            if crosscheck:
                run_crosscheck(petal, hub, work, ref.stdout)
            else:
                run_petal(petal, hub, work, ref.stdout)
        finally:
            hub.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%d failures" % len(FAILURES))
    return 1 if FAILURES else 0


def run_petal(petal, hub, work, ref_out):
    cache = os.path.join(work, "cache_embed")
    hub.log()
    r = embed(petal, REPO, env_with(cache, hub.url))
    check(r.returncode == 0, "petal embed --model %s on a fresh cache (%s)" % (REPO, r.stderr[-300:]))
    check(r.stdout == ref_out, "the same vectors as from the local folder")
    log = hub.log()
    check(len(blob_gets(log)) == 1, "model.safetensors fetched once (%d)" % len(blob_gets(log)))
    check(not any("README" in e["path"] or "data_config" in e["path"] for e in log),
          "files the model does not need are not fetched")
    r = embed(petal, REPO, env_with(cache, hub.url))
    check(r.returncode == 0 and r.stdout == ref_out, "second run: same vectors")
    check(not any("/resolve/" in e["path"] for e in hub.log()), "second run: nothing fetched")

    # serve: download once on a fresh cache, then offline with the hub stopped.
    cache = os.path.join(work, "cache_serve")
    model, vec = serve_and_embed(petal, env_with(cache, hub.url), os.path.join(work, "serve1.log"))
    check(model == REPO, "petal serve reports model %r" % model)
    expected = [float(x) for x in ref_out.splitlines()[0].strip("[]").split(",")]
    check(vec is not None and cos(vec, expected) > 0.99999, "petal serve --model %s embeds" % REPO)
    check(len(blob_gets(hub.log())) == 1, "petal serve downloaded the weights once")

    # Errors, each with its message.
    r = embed(petal, "sentence-transformers/not-there", env_with(cache, hub.url))
    check(r.returncode != 0 and "no repository 'sentence-transformers/not-there'" in r.stderr,
          "bad id: " + r.stderr.strip()[-200:])
    r = embed(petal, REPO + "@no-such-tag", env_with(cache, hub.url))
    check(r.returncode != 0 and "no revision 'no-such-tag'" in r.stderr,
          "bad revision: " + r.stderr.strip()[-200:])
    r = embed(petal, REPO, env_with(os.path.join(work, "empty"), hub.url, offline=True))
    check(r.returncode != 0 and "HF_HUB_OFFLINE" in r.stderr and "not in the hub cache" in r.stderr,
          "offline miss: " + r.stderr.strip()[-200:])

    hub.stop()
    model, vec2 = serve_and_embed(petal, env_with(cache, "http://127.0.0.1:1", offline=True),
                                  os.path.join(work, "serve2.log"))
    check(vec2 is not None and vec2 == vec, "restart with HF_HUB_OFFLINE=1 serves from the cache")


def run_crosscheck(petal, hub, work, ref_out):
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # read when huggingface_hub is imported
    from huggingface_hub import snapshot_download
    import huggingface_hub
    print("huggingface_hub", huggingface_hub.__version__)
    # Petal fills -> huggingface_hub finds it, offline.
    cache = os.path.join(work, "cache_petal")
    r = embed(petal, REPO, env_with(cache, hub.url))
    check(r.returncode == 0 and r.stdout == ref_out, "petal fills a fresh cache")
    snap = snapshot_download(REPO, cache_dir=cache, local_files_only=True)
    want = os.path.join(cache, "models--sentence-transformers--all-MiniLM-L6-v2", "snapshots")
    check(os.path.dirname(snap) == want, "snapshot_download(local_files_only) finds %s" % snap)
    for rel in ["config.json", "model.safetensors", "1_Pooling/config.json", "tokenizer.json"]:
        same = open(os.path.join(snap, rel), "rb").read() == open(os.path.join(MODEL, rel), "rb").read()
        check(same, "huggingface_hub reads Petal's %s unchanged" % rel)

    # huggingface_hub fills -> Petal uses it offline, and online without downloading.
    cache = os.path.join(work, "cache_python")
    snap = snapshot_download(REPO, cache_dir=cache, endpoint=hub.url, allow_patterns=PATTERNS)
    check(os.path.isfile(os.path.join(snap, "model.safetensors")), "snapshot_download fills a cache")
    hub.log()
    r = embed(petal, REPO, env_with(cache, "http://127.0.0.1:1", offline=True))
    check(r.returncode == 0 and r.stdout == ref_out,
          "petal uses huggingface_hub's cache offline (%s)" % r.stderr[-300:])
    r = embed(petal, REPO, env_with(cache, hub.url))
    check(r.returncode == 0 and r.stdout == ref_out, "petal uses huggingface_hub's cache online")
    log = hub.log()
    check(not any("/resolve/" in e["path"] for e in log), "online: nothing fetched (%d requests)" % len(log))


if __name__ == "__main__":
    sys.exit(main())
