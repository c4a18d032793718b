#!/usr/bin/env bash
# GPU step (issue 32, session 28): the fused GEMMs for bf16 batches of >= 4096 tokens
# (PETAL_FUSED_GEMMS=auto:4096, or S28_FUSED_MODE), after the epilogue rewrites. Trimmed to the
# device time session 28 had left: the fused op cases against the CPU; `petal bench engine` on
# 0.6b (this build in that mode, this build with the fused GEMMs off = the default, and
# 2ee956c = the baseline, which ignores the variable; one round); fidelity
# against HF fp32 next to HF bf16 (compare_hf.py, 0.6b bidirectional, 1 to 8,191 tokens in one
# ragged batch, so the big batch takes the fused path); with S28_WITH_4B=1, 4b 100 x 512, the mode
# against off.
# Bundle: PETAL_BUNDLE_ONLY="petal ops_gpu_test". Carry
# `.gpu_bundle` and `.gpu_probe/base`. ~3 min. Results in $OUT/s28_final/ and $OUT/bin_ab-s28*/.
set -uo pipefail
rc=0
D="$OUT/s28_final"
mkdir -p "$D"
B=.gpu_bundle/bin
timeout 40 $B/ops_gpu_test --gtest_filter='GemmFused*:-*Timing*' > "$D/ops.txt" 2>&1 || rc=1
grep -E '^\[  (PASSED|FAILED) |FAILED' "$D/ops.txt" | head -10
M=/tmp/petal-models
[[ -x .gpu_probe/base/petal ]] || { xz -dk .gpu_probe/base/petal.xz && chmod +x .gpu_probe/base/petal; }
# The fused mode under test (FUSED, default auto:4096) against this build with the fused GEMMs off.
FUSED=${S28_FUSED_MODE:-auto:4096}
export PETAL_FUSED_GEMMS=$FUSED
printf '#!/bin/sh\nPETAL_FUSED_GEMMS=0 exec %s "$@"\n' "$PWD/$B/petal" > /tmp/petal-off
chmod +x /tmp/petal-off
BIN_AB_BINS="new=$B/petal off=/tmp/petal-off base=.gpu_probe/base/petal" BIN_AB_SHAPES=0.6b \
  BIN_AB_ROUNDS=1 BIN_AB_TAG=s28 BIN_AB_SCENARIOS=latency_1x4096,throughput_100x512 \
  timeout 90 bash scripts/gpu/steps/bin_ab.sh || rc=1
grep -h "bf16 gate/up\|bf16 QKV" "$OUT"/bin_ab-s28/0.6b-new-r1.json.kernels.txt 2>/dev/null
timeout 70 python3 scripts/gpu/compare_hf.py --model $M/0.6b-bidirectional --name 0.6b-bidirectional \
  --lengths 1,16,77,128,300,512,1000,2048,4096,8191 --out "$D/compare-0.6b-bidirectional.json" 2>&1 |
  tail -n 12 || rc=1
[[ -n ${S28_WITH_4B:-} ]] && { BIN_AB_BINS="new=$B/petal off=/tmp/petal-off" BIN_AB_SHAPES=4b \
  BIN_AB_ROUNDS=1 BIN_AB_TAG=s28-4b BIN_AB_SCENARIOS=throughput_100x512 \
  timeout 80 bash scripts/gpu/steps/bin_ab.sh || rc=1; }
exit $rc
