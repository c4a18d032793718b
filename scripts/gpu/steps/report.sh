#!/usr/bin/env bash
# GPU step `report`: the benchmark report of issue 9 (bench/run_gpu.sh): pplx-embed-v1-0.6b shape
# with the real Qwen3 tokenizer, accuracy gate against HF transformers, then every scenario for
# Petal (engine, gRPC, HTTP) and the baselines (HF transformers eager and CUDA graph,
# sentence-transformers). Needs models/tokenizers/qwen3 carried next to .gpu_bundle. Fits a
# 10-minute call: the script stops starting steps after PETAL_BENCH_BUDGET_S (default 530 s;
# the `info` step before it takes a few seconds). Results in $OUT/bench_report/.
set -euo pipefail
export PETAL_GPU_STEP=report
bash bench/run_gpu.sh
