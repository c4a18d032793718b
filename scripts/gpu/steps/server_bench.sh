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
petal client --server $ADDR stats > "$OUT/bench/server-stats.txt" || true
if [[ -n "${PETAL_GRPC_AB:-}" ]]; then
  # Where the gRPC overhead goes: the same server with clients that busy-poll for replies; then a
  # server that sleeps instead of spinning when idle; then the transport alone (FakeEngine).
  petal client --server $ADDR bench --seconds "${PETAL_BENCH_SECONDS:-3}" --busy-poll \
    --scenarios latency_1x128,latency_1x512,latency_5x512 --out "$OUT/bench/petal-grpc-busypoll.json"
fi
kill -TERM $pid; wait $pid || true
tail -n 5 "$OUT/bench/server.log"
if [[ -n "${PETAL_GRPC_AB:-}" ]]; then
  petal server --model $M --listen $ADDR --backend cuda --max-batch-tokens 32768 --max-batch-seqs 128 \
    --idle-spin-us 0 > "$OUT/bench/server-nospin.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 120); do petal client --server $ADDR health >/dev/null 2>&1 && break; sleep 0.5; done
  petal client --server $ADDR bench --seconds "${PETAL_BENCH_SECONDS:-3}" \
    --scenarios latency_1x128,latency_1x512 --out "$OUT/bench/petal-grpc-nospin.json"
  kill -TERM $pid; wait $pid || true
  for lat in 0 1200; do
    petal server --fake-engine --fake-latency-us $lat --listen $ADDR > /dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 60); do petal client --server $ADDR health >/dev/null 2>&1 && break; sleep 0.2; done
    for poll in "" --busy-poll; do
      petal client --server $ADDR bench --seconds 2 --scenarios latency_1x128 $poll \
        --out "$OUT/bench/fake-grpc-${lat}us${poll}.json"
    done
    kill -TERM $pid; wait $pid || true
  done
fi
