#!/usr/bin/env python3
"""Request tracing end to end: `petal serve --otlp-endpoint --replica-transport unix` (CPU engine,
MiniLM, a replica process, so the trace crosses processes) against a loopback OTLP/HTTP JSON
collector. (With the default local transport the same spans come from one process, all with
service petal-gateway.)

Usage: tracing_test.py PETAL_BIN. One POST /v1/embeddings with a W3C `traceparent` must produce,
all under the incoming trace id: the gateway's server span (parent: the incoming span id) with
children parse, tokenize, chunk (client) and format; and the server process's
petal.v1.Embedder/Embed span (service petal-server) whose parent is that chunk span, with
children "queue wait" and "engine step"; every child within its parent's time. Then the same
with the collector gone: requests are still answered, promptly. Exits 77 without the model.
"""
import json
import os
import sys
import time
import urllib.request

from otlp_collector import Collector
from petal_proc import Checks, PetalServe, model_present, skip

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def post(base, body, headers=None):
    req = urllib.request.Request(base + "/v1/embeddings", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, json.loads(r.read())


def main():
    if not model_present():
        return skip("the MiniLM model is missing")
    check = Checks()

    collector = Collector()
    serve = PetalServe(sys.argv[1], ["--otlp-endpoint", collector.endpoint,
                                     "--replica-transport", "unix"])
    try:
        status, body = post(serve.base, {"input": ["Hello, world", "traced request"]},
                            {"traceparent": "00-%s-%s-01" % (TRACE_ID, PARENT)})
        check(status == 200 and len(body["data"]) == 2, "traced request: %d" % status)
        want = {"POST /v1/embeddings", "parse", "tokenize", "chunk", "format",
                "petal.v1.Embedder/Embed", "queue wait", "engine step"}
        deadline = time.time() + 15
        while time.time() < deadline:
            mine = [(svc, s) for svc, s in collector.spans() if s["traceId"] == TRACE_ID]
            if want <= {s["name"] for _, s in mine}:
                break
            time.sleep(0.1)
        names = sorted(s["name"] for _, s in mine)
        print("spans of the trace:", names)
        check(want <= set(names), "missing spans: %s" % sorted(want - set(names)))
        by_id = {s["spanId"]: (svc, s) for svc, s in mine}
        by_name = {}
        for svc, s in mine:
            by_name.setdefault(s["name"], []).append((svc, s))

        def one(name):
            got = by_name.get(name, [])
            check(len(got) == 1, "%s: %d spans" % (name, len(got)))
            return got[0] if got else ("", {})

        def within(child, parent, what):
            cs, ce = int(child["startTimeUnixNano"]), int(child["endTimeUnixNano"])
            ps, pe = int(parent["startTimeUnixNano"]), int(parent["endTimeUnixNano"])
            # The two processes read the same wall clock; allow 2 ms for the conversion from
            # steady time in the server.
            check(ps - 2_000_000 <= cs <= ce <= pe + 2_000_000, "%s: not within its parent" % what)

        if want <= set(names):
            gsvc, root = one("POST /v1/embeddings")
            check(gsvc == "petal-gateway", "root span's service: %s" % gsvc)
            check(root.get("parentSpanId") == PARENT, "root's parent is the incoming span: %s" % root.get("parentSpanId"))
            check(root["kind"] == 2, "root is a SERVER span")
            for name in ("parse", "tokenize", "chunk", "format"):
                svc, s = one(name)
                check(svc == "petal-gateway" and s.get("parentSpanId") == root["spanId"],
                      "%s: child of the gateway's span" % name)
                within(s, root, name)
            _, chunk = one("chunk")
            check(chunk["kind"] == 3, "chunk is a CLIENT span")
            ssvc, embed = one("petal.v1.Embedder/Embed")
            check(ssvc == "petal-server", "server span's service: %s" % ssvc)
            check(embed.get("parentSpanId") == chunk["spanId"], "server span's parent is the chunk span (traceparent metadata)")
            within(embed, chunk, "server span")
            for name in ("queue wait", "engine step"):
                for svc, s in by_name[name]:
                    check(svc == "petal-server" and s.get("parentSpanId") == embed["spanId"],
                          "%s: child of the server span" % name)
                    within(s, embed, name)
            for svc, s in mine:
                check(s.get("parentSpanId") in by_id or s is root, "%s: parent not in the trace" % s["name"])
        # Untraced callers get a trace of their own (a new trace id), not the previous one.
        before = {s["traceId"] for _, s in collector.spans()}
        post(serve.base, {"input": "no traceparent"})
        time.sleep(1.5)
        new = {s["traceId"] for _, s in collector.spans()} - before
        check(len(new) == 1, "a request without traceparent starts one new trace: %s" % new)
        # The collector goes away: requests are answered as before and do not wait on it (the
        # exporter's POSTs fail after its 2 s timeout; a request that waited would show it).
        def timed(what):
            t0 = time.time()
            for i in range(10):
                status, _ = post(serve.base, {"input": "%s %d" % (what, i)},
                                 {"traceparent": "00-%s-%s-01" % (TRACE_ID, PARENT)})
                check(status == 200, "%s: %d" % (what, status))
            return (time.time() - t0) / 10
        up = timed("collector up")
        collector.close()
        down = timed("collector down")
        print("per request: %.1f ms with the collector up, %.1f ms down" % (up * 1e3, down * 1e3))
        check(down < 3 * up + 0.2, "collector down: %.0f ms per request (up: %.0f)" % (down * 1e3, up * 1e3))
    finally:
        code = serve.stop()
    return check.finish(code)


if __name__ == "__main__":
    sys.exit(main())
