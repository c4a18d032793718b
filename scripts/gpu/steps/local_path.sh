#!/usr/bin/env bash
# GPU step (issue 29): the serving path with replicas in the gateway's process against replica
# processes, in one run, on the pplx-embed-v1-0.6b random-weight shape with the Qwen3 tokenizer
# (carry models/tokenizers/qwen3):
#  1. the engine alone (`petal bench engine`): 1 x 128, 1 x 512, and 100 x 512 throughput;
#  2. `petal serve --replica-transport local` and `unix` (a server process per replica, the path
#     of every earlier build), alternating over LP_ROUNDS rounds (default 2): `petal bench http`
#     (1 client at 127 and 511 words, 16 clients at 511) and the independent client
#     bench/http_load.py (the same scenarios), then 4 clients x 100 texts x 4096 words at the
#     default limits (errors counted).
# Results: $OUT/local_path/*.json and *.log, summary.md. ~6 min.
# The same comparison for the CPU engine (issue 29 asks for MiniLM), on any machine with a built
# petal on PATH: LP_MODEL=models/all-MiniLM-L6-v2 LP_BACKEND=cpu LP_WORDS="127 250" LP_BULK=0
# (on the GPU machine: a random MiniLM-shape folder from scripts/gpu/make_minilm_shape.py)
# OUT=... bash scripts/gpu/steps/local_path.sh. LP_TRANSPORTS (default "local unix") picks the
# transports; the environment (e.g. PETAL_HTTP_DIRECT_REPLY=0) reaches `petal serve`. The transport
# name `base` runs another build's `petal serve` as it is (LP_BASE=path to its petal, e.g. 2ee956c's,
# whose replicas are processes), measured by this build's clients: the before/after of issue 29.
# A transport name ending in `-nohold` (e.g. `local-nohold`) serves with the partial-batch hold
# off (`--batch-hold-lead-us=-1`): LP_TRANSPORTS="local local-nohold" is its A/B.
set -uo pipefail
# The health probe is the system curl, without the bundle's libraries (its libcurl breaks it).
D="$OUT/local_path"
mkdir -p "$D"
M="${LP_MODEL:-/tmp/petal-models/0.6b-bidirectional-qwen3tok}"
B="${LP_BACKEND:-cuda}"
WORDS="${LP_WORDS:-127 511}"
LAST_W="${WORDS##* }"  # the longest: also run with 16 clients
[[ -f $M/model.safetensors ]] || petal make-model --shape pplx-embed-v1-0.6b --attention bidirectional \
  --tokenizer models/tokenizers/qwen3/tokenizer.json --out $M >/dev/null
SECS="${PETAL_BENCH_SECONDS:-3}"
rc=0
echo "== 1. engine"
SC=latency_1x128,latency_1x512,throughput_100x512
[[ $B == cpu ]] && SC=latency_1x128,latency_1x256,throughput_32x128
timeout 300 petal bench engine --model $M --backend $B --max-batch-tokens 32768 --max-batch-seqs 128 \
  --seconds $SECS --scenarios $SC --out "$D/engine.json" \
  > "$D/engine.log" 2>&1 || { tail -5 "$D/engine.log"; rc=1; }
grep -E "latency|throughput" "$D/engine.log"
PORT=18480
for r in $(seq 1 "${LP_ROUNDS:-2}"); do
  for t in ${LP_TRANSPORTS:-local unix}; do
    echo "== 2. serve --replica-transport $t, round $r"
    if [[ $t == base ]]; then
      [[ -x "${LP_BASE:-}" ]] || { echo "transport base needs LP_BASE (a petal binary)"; rc=1; continue; }
      "$LP_BASE" serve --model $M --backend $B --port $PORT > "$D/serve-$t-r$r.log" 2>&1 &
    else
      extra=(); tt=$t
      [[ $t == *-nohold ]] && { tt=${t%-nohold}; extra=(--server-arg=--batch-hold-lead-us=-1); }
      petal serve --model $M --backend $B --port $PORT --replica-transport $tt "${extra[@]}" \
        > "$D/serve-$t-r$r.log" 2>&1 &
    fi
    pid=$!
    up=0
    for _ in $(seq 1 600); do env -u LD_LIBRARY_PATH curl -sf -o /dev/null http://127.0.0.1:$PORT/health && { up=1; break; }; sleep 0.25; done
    if ((up == 0)); then echo "serve ($t) did not start"; tail -5 "$D/serve-$t-r$r.log"; kill $pid; rc=1; continue; fi
    for w in $WORDS; do
      cc=1; [[ $w == "$LAST_W" ]] && cc=1,16
      timeout 120 petal bench http --gateway 127.0.0.1:$PORT --concurrency $cc --words $w --seconds $SECS \
        --warmup-seconds 1 --out "$D/http-$t-w$w-r$r.json" 2>&1 | grep -v curl | tee "$D/http-$t-w$w-r$r.log"
      timeout 120 python3 bench/http_load.py --url http://127.0.0.1:$PORT --clients $cc --words $w \
        --seconds $SECS --warmup 1 --out "$D/pyload-$t-w$w-r$r.json" 2>&1 | tee "$D/pyload-$t-w$w-r$r.log"
    done
    if [[ $r == 1 && "${LP_BULK:-1}" == 1 ]]; then
      timeout 200 python3 bench/http_load.py --url http://127.0.0.1:$PORT --clients 4 --texts 100 --words 4096 \
        --requests 3 --seconds 0 --warmup 0 --out "$D/bulk-$t.json" 2>&1 | tee "$D/bulk-$t.log"
    fi
    kill -TERM $pid; wait $pid || true
  done
done
python3 - "$D" <<'PY' | tee "$D/summary.md"
import glob, json, os, re, sys
d = sys.argv[1]
eng = json.load(open(os.path.join(d, "engine.json"))).get("scenarios", {}) if os.path.exists(os.path.join(d, "engine.json")) else {}
print("engine alone: " + ", ".join("%s %s" % (k, "%.3f ms" % v["p50_ms"] if v.get("p50_ms") else "%.0f emb/s" % v.get("emb_per_s", 0)) for k, v in eng.items()))
print("\n| client | transport | scenario | p50 ms per round | p99 ms per round | req/s per round | errors |")
print("|---|---|---|---|---|---|---|")
rows = {}
for f in sorted(glob.glob(os.path.join(d, "pyload-*.json"))):
    t, w, r = re.match(r"pyload-([\w-]+)-w(\d+)-r(\d+)\.json", os.path.basename(f)).groups()
    for x in json.load(open(f))["results"]:
        rows.setdefault(("http_load.py", t, "%d x %s" % (x["clients"], w)), []).append(x)
for f in sorted(glob.glob(os.path.join(d, "http-*.json"))):
    t, w, r = re.match(r"http-([\w-]+)-w(\d+)-r(\d+)\.json", os.path.basename(f)).groups()
    def runs(o):
        if isinstance(o, dict):
            if "concurrency" in o and "p50_ms" in o: yield o
            for v in o.values(): yield from runs(v)
    for x in runs(json.load(open(f))):
        c = x["concurrency"]
        rows.setdefault(("petal bench http", t, "%s x %s" % (c, w)), []).append(
            {"p50_ms": x.get("p50_ms"), "p99_ms": x.get("p99_ms"), "req_per_s": x.get("req_per_s"), "errors": x.get("errors", 0)})
f3 = lambda v: "%.3f" % v if isinstance(v, (int, float)) else "-"
for k in sorted(rows):
    xs = rows[k]
    print("| %s | %s | %s | %s | %s | %s | %s |" % (k[0], k[1], k[2], " / ".join(f3(x.get("p50_ms")) for x in xs),
          " / ".join(f3(x.get("p99_ms")) for x in xs), " / ".join("%.0f" % (x.get("req_per_s") or 0) for x in xs),
          sum(x.get("errors", 0) or 0 for x in xs)))
for t in ("local", "unix", "base"):
    f = os.path.join(d, "bulk-%s.json" % t)
    if os.path.exists(f):
        x = json.load(open(f))["results"][0]
        print("\nbulk 4 clients x 3 requests x 100 texts x 4096 words, %s: %d ok, %d errors, p50 %s ms %s" % (
            t, x["n"], x["errors"], f3(x["p50_ms"]), x["first_errors"][:1]))
PY
exit $rc
