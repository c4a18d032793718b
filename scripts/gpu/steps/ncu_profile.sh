#!/usr/bin/env bash
# GPU step: where the time goes, per kernel (Nsight Compute, durations only), for one eager
# forward pass of the pplx-embed-v1-0.6b shape at 1 x 128 tokens and one at 64 x 512 tokens.
# Writes $OUT/bench/ncu-<case>.csv (raw) and prints a per-kernel-family summary (ncu_families.py).
set -euo pipefail
mkdir -p "$OUT/bench"
M=/tmp/petal-models/0.6b-bidirectional
[[ -f $M/model.safetensors ]] || petal make-model --shape pplx-embed-v1-0.6b --attention bidirectional --out $M
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
[[ -n "$NCU" ]] || { echo "ncu not found"; exit 1; }
# Every kernel is profiled (a few thousand, tuning included; durations only, so one pass each);
# the summary keeps the last forward pass: from the last embedding-lookup kernel to the end.
# --attention pins the backend the auto choice made for that shape in engine_bench (flash at
# 1 x 128, cuDNN at 64 x 512).
for c in "latency_1x128 flash" "throughput_100x512 cudnn"; do
  set -- $c
  timeout 170 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv \
    "$(command -v petal)" bench engine --model $M --backend cuda --no-graphs --no-check --attention $2 --max-batch-tokens 32768 \
    --max-batch-seqs 64 --seconds 0.1 --max-iters 2 --scenarios $1 > "$OUT/bench/ncu-$1.csv" 2> "$OUT/bench/ncu-$1.err" || echo "ncu failed: $1"
  python3 "$PETAL_SOURCE_DIR/scripts/gpu/ncu_families.py" --start Embedding "$OUT/bench/ncu-$1.csv"
done
