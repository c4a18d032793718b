#!/usr/bin/env bash
# GPU step `tracing`: HTTP latency with tracing off vs on (`--otlp-endpoint` to a loopback
# collector) through `petal serve` on the CUDA engine, via bench/tracing_overhead.py (issue 23).
# Model: PETAL_TRACING_MODEL (default: all-MiniLM-L6-v2 from models/ when carried, else the
# random-weight pplx-embed-v1-0.6b shape made here). Results: $OUT/tracing/tracing-cuda.json.
set -euo pipefail
mkdir -p "$OUT/tracing"
M="${PETAL_TRACING_MODEL:-}"
if [[ -z "$M" ]]; then
  if [[ -f models/all-MiniLM-L6-v2/model.safetensors ]]; then
    M=models/all-MiniLM-L6-v2
  else
    M=/tmp/petal-models/0.6b-bidirectional
    [[ -f $M/model.safetensors ]] || petal make-model --shape pplx-embed-v1-0.6b --attention bidirectional --out $M
  fi
fi
python3 bench/tracing_overhead.py --petal "$(command -v petal)" --backend cuda --model "$M" \
  --concurrency "${PETAL_TRACING_CONCURRENCY:-1,4,16}" --words "${PETAL_TRACING_WORDS:-128}" \
  --seconds "${PETAL_BENCH_SECONDS:-5}" --rounds "${PETAL_TRACING_ROUNDS:-3}" \
  --out "$OUT/tracing/tracing-cuda.json"
