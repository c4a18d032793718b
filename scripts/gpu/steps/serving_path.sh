#!/usr/bin/env bash
# GPU step: where the serving path spends its time (issue 20), hop by hop, in one run, on the
# pplx-embed-v1-0.6b random-weight shape (bidirectional, real Qwen3 tokenizer):
#  1. the engine alone (`petal bench engine`): 1 x 128, 1 x 512;
#  2. + the server and gRPC (`petal bench grpc`, pre-tokenized) over loopback TCP and over a Unix
#     socket, sleeping and busy-polling clients;
#  3. + the gateway (`petal serve` + `petal bench http`, 510-token texts, 1 and 16 clients) in four
#     configurations, each adding one change: TCP + callbacks + answers posted to an I/O thread
#     (the previous path) -> Unix socket -> reply poller -> answers written by the replying
#     thread (PETAL_HTTP_DIRECT_REPLY=1); the defaults are a Unix socket, callbacks, posted
#     answers (the other two measured no faster);
#     (+ f: the server's gRPC poller, --grpc-poll-us 2000);
#  4. the transport alone: the same with the FakeEngine at 0 and 1,200 us per batch.
# Results: $OUT/serving/*.json, summary.md; summary on stdout.
set -uo pipefail
D="$OUT/serving"
mkdir -p "$D"
M=/tmp/petal-models/0.6b-bidirectional-qwen3tok
[[ -f $M/model.safetensors ]] || petal make-model --shape pplx-embed-v1-0.6b --attention bidirectional \
  --tokenizer models/tokenizers/qwen3/tokenizer.json --out $M >/dev/null
SECS="${PETAL_BENCH_SECONDS:-2}"
CAP="--max-batch-tokens 32768 --max-batch-seqs 128"
rc=0

echo "== 1. engine"
timeout 120 petal bench engine --model $M --backend cuda $CAP --seconds $SECS \
  --scenarios latency_1x128,latency_1x512 --out "$D/engine.json" > "$D/engine.log" 2>&1 || { tail -5 "$D/engine.log"; rc=1; }

wait_grpc() { for _ in $(seq 1 240); do petal client --server "$1" health >/dev/null 2>&1 && return 0; sleep 0.25; done; return 1; }
echo "== 2. server + gRPC"
for t in tcp unix unix-grpcpoll; do
  if [[ $t == tcp ]]; then A=127.0.0.1:50161; else A=unix:/tmp/petal-serving-path.sock; rm -f /tmp/petal-serving-path.sock; fi
  X=""; [[ $t == unix-grpcpoll ]] && X="--grpc-poll-us 2000"
  petal server --model $M --listen $A --backend cuda $CAP $X > "$D/server-$t.log" 2>&1 &
  pid=$!
  wait_grpc $A || { echo "server ($t) did not start"; tail -5 "$D/server-$t.log"; rc=1; }
  for poll in "" --busy-poll; do
    timeout 60 petal bench grpc --server $A --seconds $SECS --scenarios latency_1x128,latency_1x512 $poll \
      --out "$D/grpc-$t${poll}.json" > "$D/grpc-$t${poll}.log" 2>&1 || { tail -3 "$D/grpc-$t${poll}.log"; rc=1; }
  done
  kill -TERM $pid; wait $pid 2>/dev/null
done

http_get() { python3 -c 'import sys,urllib.request;sys.stdout.write(urllib.request.urlopen(sys.argv[1],timeout=10).read().decode())' "$1"; }
serve_run() {  # serve_run NAME ENGINE-ARGS... -- SERVE-ARGS...  (env passes through)
  local name=$1; shift
  petal serve --model $M --port 18090 "$@" > "$D/serve-$name.log" 2>&1 &
  local pid=$!
  local up=0
  for _ in $(seq 1 240); do http_get http://127.0.0.1:18090/ready >/dev/null 2>&1 && { up=1; break; }; sleep 0.25; done
  if [[ $up == 1 ]]; then
    timeout 60 petal bench http --gateway 127.0.0.1:18090 --concurrency 1,16 --seconds $SECS \
      --out "$D/http-$name.json" > "$D/http-$name.log" 2>&1 || { tail -3 "$D/http-$name.log"; rc=1; }
    http_get http://127.0.0.1:18090/metrics > "$D/metrics-$name.txt" 2>/dev/null
  else
    echo "serve ($name) did not start"; tail -5 "$D/serve-$name.log"; rc=1
  fi
  kill -TERM $pid; wait $pid 2>/dev/null
}
echo "== 3. gateway (petal serve)"
S="--backend cuda --server-arg=--max-batch-tokens=32768 --server-arg=--max-batch-seqs=128"
serve_run a-tcp-callbacks-posted $S --replica-transport tcp --reply-poll-us -1
serve_run b-unix-callbacks-posted $S --replica-transport unix --reply-poll-us -1
serve_run c-unix-poller-posted $S --replica-transport unix --reply-poll-us 200
PETAL_HTTP_DIRECT_REPLY=1 serve_run d-unix-poller-direct $S --reply-poll-us 200
PETAL_HTTP_DIRECT_REPLY=1 serve_run e-tcp-poller-direct $S --replica-transport tcp --reply-poll-us 200
PETAL_HTTP_DIRECT_REPLY=1 serve_run f-unix-poller-direct-grpcpoll $S --reply-poll-us 200 --server-arg=--grpc-poll-us=2000

echo "== 4. transport alone (FakeEngine)"
F="--fake-engine --server-arg=--fake-vocab-size=200000"
for lat in 0 1200; do
  serve_run fake${lat}-a $F --server-arg=--fake-latency-us=$lat --replica-transport tcp --reply-poll-us -1
  PETAL_HTTP_DIRECT_REPLY=1 serve_run fake${lat}-d $F --server-arg=--fake-latency-us=$lat --reply-poll-us 200
  PETAL_HTTP_DIRECT_REPLY=1 serve_run fake${lat}-f $F --server-arg=--fake-latency-us=$lat --reply-poll-us 200 --server-arg=--grpc-poll-us=2000
done

python3 - "$D" <<'PY' | tee "$D/summary.md"
import glob, json, os, re, sys
d = sys.argv[1]
def load(n):
    try: return json.load(open(os.path.join(d, n)))
    except Exception: return None
def p50(j, sc):
    s = (j or {}).get("scenarios", {}).get(sc, {})
    return s.get("p50_ms")
e = load("engine.json")
print("| layer | 1x128 p50 ms | 1x512 p50 ms |\n|---|---|---|")
print("| engine | %s | %s |" % (p50(e, "latency_1x128"), p50(e, "latency_1x512")))
for t in ("tcp", "unix", "unix-grpcpoll"):
    for poll in ("", "--busy-poll"):
        j = load("grpc-%s%s.json" % (t, poll))
        srv = lambda sc: (j or {}).get("scenarios", {}).get(sc, {}).get("server_p50_ms")
        print("| gRPC %s%s | %s (server %s) | %s (server %s) |" % (t, " busy-poll" if poll else "",
              p50(j, "latency_1x128"), srv("latency_1x128"), p50(j, "latency_1x512"), srv("latency_1x512")))
print("\n| petal serve config | 1 client p50 ms | p99 | 16 clients p50 ms | p99 | 1 client Server-Timing p50 ms |\n|---|---|---|---|---|---|")
for f in sorted(glob.glob(os.path.join(d, "http-*.json"))):
    name = os.path.basename(f)[5:-5]
    j = load(os.path.basename(f))
    c1 = j["scenarios"].get("concurrency_1", {}); c16 = j["scenarios"].get("concurrency_16", {})
    tok = " ".join("%s %.3f" % kv for kv in c1.get("server_timing_p50_ms", {}).items())
    print("| %s | %s | %s | %s | %s | %s |" % (name, c1.get("p50_ms"), c1.get("p99_ms"), c16.get("p50_ms"), c16.get("p99_ms"), tok))
PY
exit $rc
