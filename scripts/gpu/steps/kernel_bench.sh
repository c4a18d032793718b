#!/usr/bin/env bash
# GPU step: kernel micro-benchmarks: cuBLASLt GEMMs (heuristic-first vs autotuned, all model
# shapes, and the 0.6b model's 112 GEMMs in one graph) and the ragged attention variants.
set -euo pipefail
mkdir -p "$OUT/bench"
B=.gpu_bundle/bin
if [[ -x $B/petal_gemm_bench ]]; then
  $B/petal_gemm_bench --out "$OUT/bench/gemm_h200.json" > "$OUT/bench/gemm_h200.txt" 2>&1 || echo "gemm bench failed"
  grep -E "all-112|graph" "$OUT/bench/gemm_h200.txt" | tail -n 8 || true
fi
if [[ -x $B/petal_attention_bench ]]; then
  $B/petal_attention_bench > "$OUT/bench/attention.txt" 2>&1 || echo "attention bench failed"
  grep -E "\*" "$OUT/bench/attention.txt" | tail -n 12 || true
fi
