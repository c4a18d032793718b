#!/usr/bin/env bash
# GPU step: a short check after a kernel change: the op tests named by PETAL_QUICK_FILTER (gtest
# filter over ops_gpu_test), the engine test, then `petal bench engine` (CPU-reference cosine
# check first) on a few scenarios (PETAL_BENCH_SCENARIOS). For when the full `tests` step and
# `engine_bench` do not fit in the device time left.
set -euo pipefail
mkdir -p "$OUT/bench"
B=.gpu_bundle/bin
$B/ops_gpu_test --gtest_filter="${PETAL_QUICK_FILTER:-OpsGpuTest2.*}" 2>&1 | tail -n 4
$B/cuda_engine_test 2>&1 | tail -n 2
M=/tmp/petal-models/0.6b-bidirectional
[[ -f $M/model.safetensors ]] || petal make-model --shape pplx-embed-v1-0.6b --attention bidirectional --out $M
petal bench engine --model $M --backend cuda --max-batch-tokens 32768 --max-batch-seqs 128 \
  --seconds "${PETAL_BENCH_SECONDS:-1}" --scenarios "${PETAL_BENCH_SCENARIOS:-latency_1x128,latency_1x4096,throughput_100x512,throughput_100x4096}" \
  --out "$OUT/bench/quick-engine.json" 2>&1 | grep -vE "^  m=|^  attention seqs" | tail -n 14
