#!/usr/bin/env bash
# GPU step: the high-concurrency scenario through the gateway (issue #8): `petal serve` on the
# CUDA engine with the pplx-embed-v1-0.6b random-weight shape and the real Qwen3 tokenizer, then
# `petal bench-http` (texts of ~512 tokens, one per request, 1/2/4/8/16 concurrent clients;
# tokenization and the gateway-to-server hop included). Results JSON in $OUT/bench/.
set -euo pipefail
mkdir -p "$OUT/bench"
M=/tmp/petal-models/0.6b-bidirectional-qwen3tok
[[ -f $M/model.safetensors ]] || petal make-model --shape pplx-embed-v1-0.6b --attention bidirectional \
  --tokenizer models/tokenizers/qwen3/tokenizer.json --out $M
PORT=18080
# curl may be missing on the GPU machine; python3 is there.
http() {  # http URL [JSON-BODY]
  python3 - "$@" <<'PY'
import sys, urllib.request
req = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode() if len(sys.argv) > 2 else None,
                             headers={"Content-Type": "application/json"})
sys.stdout.write(urllib.request.urlopen(req, timeout=30).read().decode())
PY
}
petal serve --model $M --backend cuda --port $PORT --server-arg=--max-batch-tokens=32768 \
  --server-arg=--max-batch-seqs=128 ${PETAL_SERVE_ARGS:-} > "$OUT/bench/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 240); do http http://127.0.0.1:$PORT/ready >/dev/null 2>&1 && break; sleep 0.5; done
http http://127.0.0.1:$PORT/ready
echo
# One real request first: the tokenizer and the route work end to end.
http http://127.0.0.1:$PORT/v1/embeddings \
  '{"input": "The quick brown fox jumps over the lazy dog.", "model": "m"}' | head -c 200
echo
petal bench-http --gateway 127.0.0.1:$PORT --seconds "${PETAL_BENCH_SECONDS:-3}" --out "$OUT/bench/petal-http.json"
http http://127.0.0.1:$PORT/metrics > "$OUT/bench/gateway-metrics.txt" || true
grep -E "_(sum|count) " "$OUT/bench/gateway-metrics.txt" | head -n 20 || true
kill -TERM $pid; wait $pid || true
tail -n 3 "$OUT/bench/serve.log"
