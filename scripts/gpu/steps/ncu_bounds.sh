#!/usr/bin/env bash
# GPU step (issue 32): what bounds each kernel of one forward pass (Nsight Compute): duration,
# DRAM / L2 / SM throughput as % of peak, achieved occupancy and grid size per kernel family, for
# the 0.6b shape at 1 x 128, 1 x 512 and one 100 x 512 batch (bf16; NCU_FP8=1 adds fp8 100 x 512
# with --no-fp8-gate). Eager (no graphs), tuner choices made in warm-up passes outside the profile
# (PETAL_PROFILE_FORWARDS, src/engine/cuda/profile_window.h), caches not flushed between kernels.
# Results: $OUT/ncu_bounds/<case>.csv (raw) and <case>.md (scripts/gpu/ncu_table.py). ~3 min.
set -uo pipefail
D="$OUT/ncu_bounds"
mkdir -p "$D"
M=/tmp/petal-models/0.6b-bidirectional
[[ -f $M/model.safetensors ]] ||
  petal make-model --shape pplx-embed-v1-0.6b --attention bidirectional --out $M >/dev/null
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
[[ -n "$NCU" ]] || { echo "ncu not found"; exit 1; }
METRICS=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
METRICS+=,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed
METRICS+=,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,dram__bytes_read.sum
METRICS+=,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed
cases=("latency_1x128 flash" "latency_1x512 flash" "throughput_100x512 cudnn")
[[ "${NCU_FP8:-0}" == 1 ]] && cases+=("throughput_100x512 cudnn fp8")
rc=0
for c in "${cases[@]}"; do
  set -- $c
  name=$1${3:+-$3}
  extra=(); [[ "${3:-}" == fp8 ]] && extra=(--quantize fp8 --no-fp8-gate)
  # Warm-up and tuning take the first passes; pass 4 is a timed one (100 x 512: one batch of it).
  PETAL_PROFILE_FORWARDS=4,1 timeout 200 "$NCU" --profile-from-start off --clock-control none \
    --metrics "$METRICS" --csv --page raw \
    "$(command -v petal)" bench engine --model $M --backend cuda --no-graphs --no-check --attention $2 \
    --max-batch-tokens 32768 --max-batch-seqs 64 --seconds 0.1 --max-iters 6 --scenarios $1 "${extra[@]}" \
    > "$D/$name.csv" 2> "$D/$name.err" || { echo "ncu failed: $name"; tail -3 "$D/$name.err"; rc=1; }
  python3 "$PETAL_SOURCE_DIR/scripts/gpu/ncu_table.py" "$D/$name.csv" > "$D/$name.md" || rc=1
  head -14 "$D/$name.md"
done
exit $rc
