#!/usr/bin/env bash
# GPU step `tracing` (issue 23): HTTP latency with tracing off vs on (`--otlp-endpoint` to a
# loopback collector), alternating rounds, through `petal serve` on the CUDA engine, via
# bench/tracing_overhead.py. Same setting as step http_bench (pplx-embed-v1-0.6b random-weight
# shape with the real Qwen3 tokenizer, ~510-token texts), so "off" compares with its figures.
# Carry .gpu_bundle and models/tokenizers/qwen3. Results: $OUT/tracing/tracing-cuda.json.
set -euo pipefail
mkdir -p "$OUT/tracing"
M="${PETAL_TRACING_MODEL:-/tmp/petal-models/0.6b-bidirectional-qwen3tok}"
if [[ ! -f $M/model.safetensors ]]; then
  petal make-model --shape pplx-embed-v1-0.6b --attention bidirectional \
    --tokenizer models/tokenizers/qwen3/tokenizer.json --out "$M"
fi
python3 bench/tracing_overhead.py --petal "$(command -v petal)" --backend cuda --model "$M" \
  --serve-arg=--server-arg=--max-batch-tokens=32768 --serve-arg=--server-arg=--max-batch-seqs=128 \
  --concurrency "${PETAL_TRACING_CONCURRENCY:-1,4,16}" --words "${PETAL_TRACING_WORDS:-510}" \
  --seconds "${PETAL_BENCH_SECONDS:-4}" --rounds "${PETAL_TRACING_ROUNDS:-3}" \
  --out "$OUT/tracing/tracing-cuda.json"
