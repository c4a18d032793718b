"""Starts `petal serve` (CPU engine, all-MiniLM-L6-v2) for the tests in this folder and stops it.

Thread-safety: one PetalServe per test process; not shared between threads.
"""
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.request

SKIP = 77
SRC = os.environ.get("PETAL_SOURCE_DIR", ".")
MODEL = os.path.join(SRC, "models", "all-MiniLM-L6-v2")


def model_present():
    return os.path.exists(os.path.join(MODEL, "model.safetensors"))


class PetalServe:
    """`petal serve --listen 127.0.0.1:0 ARGS...`; .base is its URL once started."""

    def __init__(self, petal_bin, args=(), env=None):
        self.log = tempfile.NamedTemporaryFile(prefix="petal_serve_", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [petal_bin, "serve", "--model", MODEL, "--backend", "cpu", "--listen", "127.0.0.1:0",
             "--shutdown-grace-ms", "1000", *args],
            stderr=self.log, stdout=subprocess.DEVNULL, env=env)
        self.base = None
        for _ in range(600):
            m = re.search(r"gateway listening.* port=(\d+)", self.read_log())
            if m:
                self.base = "http://127.0.0.1:%s" % m.group(1)
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if self.base is None:
            self.stop()
            raise RuntimeError("petal serve did not start:\n" + self.read_log())
        for _ in range(300):  # the replica answers SERVING soon after the gateway listens
            try:
                with urllib.request.urlopen(self.base + "/ready", timeout=5) as r:
                    if r.status == 200:
                        return
            except Exception:
                pass
            time.sleep(0.1)
        raise RuntimeError("petal serve never became ready:\n" + self.read_log())

    def read_log(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def stop(self):
        """SIGTERM, then the exit code (killed after 20 s: -1)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return -1
