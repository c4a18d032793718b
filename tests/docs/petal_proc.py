"""What the tests in this folder share: `petal serve` (CPU engine, all-MiniLM-L6-v2) started and
stopped (PetalServe), the skip rule (exit 77, CTest's skip: skip()) and the collected checks
(Checks), so that each test reads as its own steps.

Thread-safety: one PetalServe and one Checks per test process; not shared between threads.
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


def skip(why):
    """Says why the test is skipped; returns the exit code that CTest reads as a skip."""
    print("skipped: %s" % why)
    return SKIP


class Checks:
    """check(cond, what) records and prints each failed check; finish() ends the test."""

    def __init__(self):
        self.failures = []

    def __call__(self, cond, what):
        if not cond:
            self.failures.append(what)
            print("FAIL:", what)

    def finish(self, serve_exit_code):
        """Checks the exit code of `petal serve`, prints the count; the test's exit code."""
        self(serve_exit_code == 0, "petal serve exit code %s" % serve_exit_code)
        print("%d failures" % len(self.failures))
        return 1 if self.failures else 0


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
