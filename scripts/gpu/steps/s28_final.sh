#!/usr/bin/env bash
# GPU step (issue 32, session 28): the fused GEMMs on by default for bf16 batches of >= 4096 tokens
# (auto:4096), after the epilogue rewrites. In one call:
#   1. the fused op cases against the CPU, and their timings beside cuBLASLt + the separate kernel;
#   2. fidelity against HF fp32 next to HF bf16 (compare_hf.py, 0.6b bidirectional, sequences of
#      1 to 8,191 tokens in one ragged batch, so the big batch takes the fused path) at the
#      default, and with every batch fused (PETAL_FUSED_GEMMS=1);
#   3. cuda_engine_test and layouts_gpu_test with every batch fused (PETAL_FUSED_GEMMS=1);
#   4. `petal bench engine`: this build's default, this build with the fused GEMMs off
#      (PETAL_FUSED_GEMMS=0, the previous default) and 2ee956c (the baseline) on 0.6b,
#      the first two on 4b (100 x 512), one round (device time was short);
#   in the order 1, 2 (default), 4, 2 (every batch fused), 3.
# Bundle: PETAL_BUNDLE_ONLY="petal ops_gpu_test cuda_engine_test layouts_gpu_test". Carry
# `.gpu_bundle` and `.gpu_probe/base`. ~6 min. Results in $OUT/s28_final/ and $OUT/bin_ab-s28*/.
set -uo pipefail
rc=0
D="$OUT/s28_final"
mkdir -p "$D"
B=.gpu_bundle/bin
timeout 90 $B/ops_gpu_test --gtest_filter='GemmFused*' > "$D/ops.txt" 2>&1 || rc=1
grep -E '^q(0.6b|4b) m=|^\[  (PASSED|FAILED) |FAILED' "$D/ops.txt" | head -40
M=/tmp/petal-models
L=1,16,77,128,300,512,1000,2048,4096,8191
[[ -f $M/0.6b-bidirectional/model.safetensors ]] || petal make-model --shape pplx-embed-v1-0.6b \
  --attention bidirectional --out $M/0.6b-bidirectional >/dev/null
timeout 120 python3 scripts/gpu/compare_hf.py --model $M/0.6b-bidirectional --name 0.6b-bidirectional \
  --lengths $L --out "$D/compare-0.6b-bidirectional.json" 2>&1 | tail -n 12 || rc=1
[[ -x .gpu_probe/base/petal ]] || { xz -dk .gpu_probe/base/petal.xz && chmod +x .gpu_probe/base/petal; }
printf '#!/bin/sh\nPETAL_FUSED_GEMMS=0 exec %s "$@"\n' "$PWD/$B/petal" > /tmp/petal-off
chmod +x /tmp/petal-off
BIN_AB_BINS="new=$B/petal off=/tmp/petal-off base=.gpu_probe/base/petal" BIN_AB_SHAPES=0.6b \
  BIN_AB_ROUNDS=1 BIN_AB_TAG=s28 BIN_AB_SCENARIOS=latency_1x128,latency_1x4096,throughput_100x512 \
  timeout 130 bash scripts/gpu/steps/bin_ab.sh || rc=1
BIN_AB_BINS="new=$B/petal off=/tmp/petal-off" BIN_AB_SHAPES=4b BIN_AB_ROUNDS=1 BIN_AB_TAG=s28-4b \
  BIN_AB_SCENARIOS=throughput_100x512 timeout 100 bash scripts/gpu/steps/bin_ab.sh || rc=1
PETAL_FUSED_GEMMS=1 timeout 100 python3 scripts/gpu/compare_hf.py --model $M/0.6b-bidirectional \
  --name 0.6b-bidirectional-allfused --lengths $L \
  --out "$D/compare-0.6b-bidirectional-allfused.json" 2>&1 | tail -n 12 || rc=1
for t in layouts_gpu_test cuda_engine_test; do
  PETAL_FUSED_GEMMS=1 timeout 90 $B/$t > "$D/$t-allfused.txt" 2>&1 || rc=1
  echo "$t (every batch fused): $(grep -E '^\[  (PASSED|FAILED) ' "$D/$t-allfused.txt" | tr '\n' ' ')"
  grep -E '^\[  FAILED' "$D/$t-allfused.txt" | head -5
done
exit $rc
