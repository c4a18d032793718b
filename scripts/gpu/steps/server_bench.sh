#!/usr/bin/env bash
# GPU step: the inference server on the CUDA engine (pplx-embed-v1-0.6b random-weight shape):
# starts `petal server` on loopback, waits for SERVING, runs `petal bench grpc` (the brief's
# scenarios over gRPC; throughput with 4 concurrent clients), prints the server's stats, stops it.
set -euo pipefail
mkdir -p "$OUT/bench"
M=/tmp/petal-models/0.6b-bidirectional
[[ -f $M/model.safetensors ]] || petal make-model --shape pplx-embed-v1-0.6b --attention bidirectional --out $M
ADDR=127.0.0.1:50151
petal server --model $M --listen $ADDR --backend cuda --max-batch-tokens 32768 --max-batch-seqs 128 --max-queue-tokens 4194304 \
  > "$OUT/bench/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do petal client --server $ADDR health >/dev/null 2>&1 && break; sleep 0.5; done
petal client --server $ADDR health
petal bench grpc --server $ADDR --seconds "${PETAL_BENCH_SECONDS:-3}" --clients 4 --out "$OUT/bench/petal-grpc.json"
petal client --server $ADDR stats | head -n 40
kill -TERM $pid; wait $pid || true
tail -n 5 "$OUT/bench/server.log"
