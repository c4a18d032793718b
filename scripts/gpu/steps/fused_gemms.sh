#!/usr/bin/env bash
# GPU step (issue 32): the fused GEMMs (src/kernels/cuda/gemm_fused.h). 1) their op tests against
# the CPU references and their timings beside cuBLASLt + the separate kernel (ops_gpu_test
# GemmFused*); 2) model fidelity with them on (PETAL_FUSED_GEMMS=1: every batch) against HF fp32,
# next to HF bf16 (compare_hf.py, 0.6b bidirectional and causal); 3) `petal bench engine` A/B of
# PETAL_FUSED_GEMMS (env_ab: FUSED_AB_VALUES, default "0 auto": off, and timed at load; FUSED_AB_SHAPES, default "0.6b 4b";
# FUSED_AB_ROUNDS, default 1). Results in $OUT/fused_gemms/ and $OUT/env_ab/PETAL_FUSED_GEMMS/.
set -euo pipefail
D="$OUT/fused_gemms"
mkdir -p "$D"
B=.gpu_bundle/bin
rc=0
$B/ops_gpu_test --gtest_filter='GemmFused*' > "$D/ops.log" 2>&1 || rc=1
grep -E "us|^\[  (PASSED|FAILED) |^\[       OK|FAILED" "$D/ops.log" | tail -n 40
M=/tmp/petal-models
for v in bidirectional causal; do
  [[ -f $M/0.6b-$v/model.safetensors ]] ||
    petal make-model --shape pplx-embed-v1-0.6b --attention $v --out $M/0.6b-$v >/dev/null
  PETAL_FUSED_GEMMS=1 python3 scripts/gpu/compare_hf.py --model $M/0.6b-$v \
    --name "pplx-embed-v1-0.6b-$v-fused" --out "$D/compare-0.6b-$v-fused.json" 2>&1 | tail -n 4 || rc=1
done
AB_VAR=PETAL_FUSED_GEMMS AB_VALUES="${FUSED_AB_VALUES:-0 auto}" AB_SHAPES="${FUSED_AB_SHAPES:-0.6b 4b}" \
  AB_ROUNDS="${FUSED_AB_ROUNDS:-1}" bash scripts/gpu/steps/env_ab.sh || rc=1
exit $rc
