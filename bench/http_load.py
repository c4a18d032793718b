#!/usr/bin/env python3
"""An HTTP load client for /v1/embeddings that shares no code with the gateway (issue 29).

Each client is its own process holding one keep-alive connection (Python's http.client), sending
requests back to back for --seconds after an untimed warm-up; latency is measured around each
request. Prints one line per scenario and writes JSON: p50/p90/p99/max ms, requests/s,
embeddings/s, errors (non-200 answers and failed connections, with the first few messages), and
the p50 of each `Server-Timing` phase the gateway reported.

  python3 bench/http_load.py --url http://127.0.0.1:8080 --clients 1,16 --words 127,511 \
      --out results.json
  python3 bench/http_load.py --url ... --clients 4 --texts 100 --words 4096 --requests 3  # bulk

Texts are random common English words, about one token each with word-piece or BPE tokenizers,
so --words is roughly tokens (the gateway's `usage` gives the exact count: tokens_per_text).
"""
import argparse
import http.client
import json
import multiprocessing as mp
import random
import statistics
import time
import urllib.parse


# Common English words: one token each in word-piece (BERT) and byte-level BPE (Qwen3) vocabularies.
WORDS = ("the of and to in is was for on that with as by at from his it an were are which this be "
         "or has had not but its also first after one new two their who they been have more than "
         "other time all into most some only over year over world people city work school house "
         "water family group part state system number name place state music game team party "
         "river book film war life power line light day night road field sea war art news land "
         "home story club king court body word heart voice end side case point way man woman child").split()


def make_text(rng, words):
    return " ".join(rng.choice(WORDS) for _ in range(words))


def phases_of(header):
    out = {}
    for part in (header or "").split(","):
        name, _, rest = part.strip().partition(";")
        for attr in rest.split(";"):
            k, _, v = attr.strip().partition("=")
            if k == "dur":
                try:
                    out[name] = float(v)
                except ValueError:
                    pass
    return out


def client(args, seed, queue):
    u = urllib.parse.urlparse(args["url"])
    rng = random.Random(seed)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=args["timeout"])
    lat, phases, errors, tokens, n_texts = [], {}, [], [], args["texts"]

    def one():
        texts = [make_text(rng, args["words"]) for _ in range(n_texts)]
        body = json.dumps({"input": texts[0] if n_texts == 1 else texts})
        t0 = time.perf_counter()
        conn.request("POST", "/v1/embeddings", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        dt = (time.perf_counter() - t0) * 1e3
        if r.status != 200:
            return dt, None, "HTTP %d: %s" % (r.status, data[:200].decode(errors="replace"))
        return dt, r, json.loads(data)

    end_warm = time.perf_counter() + args["warmup"]
    while time.perf_counter() < end_warm:
        try:
            one()
        except Exception:  # noqa: BLE001 - reconnect and go on; counted in the timed part only
            conn.close()
    end = time.perf_counter() + args["seconds"]
    done = 0
    while (time.perf_counter() < end and (args["requests"] == 0 or done < args["requests"])) or \
            (args["requests"] and done < args["requests"]):
        try:
            dt, r, out = one()
        except Exception as e:  # noqa: BLE001
            errors.append("connection: %r" % e)
            conn.close()
            done += 1
            continue
        done += 1
        if r is None:
            errors.append(out)
            continue
        lat.append(dt)
        for k, v in phases_of(r.getheader("Server-Timing")).items():
            phases.setdefault(k, []).append(v)
        tokens.append(out.get("usage", {}).get("prompt_tokens", 0) / max(1, n_texts))
    queue.put({"lat": lat, "phases": phases, "errors": errors, "tokens": tokens})


def pct(v, q):
    if not v:
        return None
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def scenario(url, clients, words, texts, seconds, warmup, requests, timeout):
    args = dict(url=url, words=words, texts=texts, seconds=seconds, warmup=warmup,
                requests=requests, timeout=timeout)
    q = mp.Queue()
    procs = [mp.Process(target=client, args=(args, 1000 * words + i, q)) for i in range(clients)]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    parts = [q.get() for _ in procs]
    for p in procs:
        p.join()
    wall = time.perf_counter() - t0 - warmup
    lat = [x for p in parts for x in p["lat"]]
    errors = [x for p in parts for x in p["errors"]]
    phases = {}
    for p in parts:
        for k, v in p["phases"].items():
            phases.setdefault(k, []).extend(v)
    toks = [x for p in parts for x in p["tokens"]]
    return {
        "clients": clients, "words": words, "texts_per_request": texts, "n": len(lat),
        "p50_ms": pct(lat, 0.5), "p90_ms": pct(lat, 0.9), "p99_ms": pct(lat, 0.99),
        "max_ms": max(lat) if lat else None,
        "req_per_s": len(lat) / wall if wall > 0 else None,
        "emb_per_s": len(lat) * texts / wall if wall > 0 else None,
        "errors": len(errors), "first_errors": errors[:3],
        "tokens_per_text": statistics.mean(toks) if toks else None,
        "server_timing_p50_ms": {k: pct(v, 0.5) for k, v in sorted(phases.items())},
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--clients", default="1", help="comma-separated client counts")
    ap.add_argument("--words", default="127", help="comma-separated words per text")
    ap.add_argument("--texts", type=int, default=1, help="texts per request")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--requests", type=int, default=0, help="per client; 0: time-bound")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--out")
    a = ap.parse_args()
    results = []
    for w in [int(x) for x in a.words.split(",")]:
        for c in [int(x) for x in a.clients.split(",")]:
            r = scenario(a.url, c, w, a.texts, a.seconds, a.warmup, a.requests, a.timeout)
            results.append(r)
            st = " ".join("%s %.3f" % (k, v) for k, v in r["server_timing_p50_ms"].items())
            print("  clients %3d x %d texts x %4d words: p50 %s p99 %s ms  %.1f req/s  errors %d  "
                  "(~%s tokens/text)  server-timing p50: %s" % (
                      c, a.texts, w, "%.3f" % r["p50_ms"] if r["p50_ms"] else "-",
                      "%.3f" % r["p99_ms"] if r["p99_ms"] else "-", r["req_per_s"] or 0,
                      r["errors"], "%.0f" % r["tokens_per_text"] if r["tokens_per_text"] else "-",
                      st), flush=True)
            for e in r["first_errors"]:
                print("    error:", e)
    if a.out:
        json.dump({"url": a.url, "results": results}, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
