"""A loopback OTLP/HTTP JSON collector for tests and benchmarks: POST /v1/traces bodies are kept
(or only counted), answered 200. Thread-safety: the server thread appends under a lock; readers
call spans() / count()."""
import http.server
import json
import threading


class Collector:
    def __init__(self, keep=True):
        self._lock = threading.Lock()
        self._spans = []  # (service.name, span dict)
        self._count = 0
        keep_spans = keep
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                ok = self.path == "/v1/traces" and self.headers.get("Content-Type", "").startswith("application/json")
                n = 0
                if ok:
                    doc = json.loads(body)
                    for rs in doc.get("resourceSpans", []):
                        service = next((a["value"]["stringValue"] for a in rs["resource"]["attributes"]
                                        if a["key"] == "service.name"), "")
                        for ss in rs.get("scopeSpans", []):
                            for s in ss.get("spans", []):
                                n += 1
                                if keep_spans:
                                    with outer._lock:
                                        outer._spans.append((service, s))
                with outer._lock:
                    outer._count += n
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def spans(self):
        with self._lock:
            return list(self._spans)

    def count(self):
        with self._lock:
            return self._count

    def close(self):
        self.server.shutdown()
        self.server.server_close()
