#!/usr/bin/env bash
# GPU step (issue 32, session 26): the fused BERT FFN-input GEMM (GemmBiasGelu: bias + erf GELU
# in a CUTLASS epilogue, off by default). First its op cases and timings beside cuBLASLt + Gelu,
# with the QKV-rope cases (their store moved into a shared helper); then layouts_gpu_test with
# PETAL_FUSED_GELU=1 (every BERT / XLM-R layout fused at every batch size, against the committed
# HF fp32 and bf16 goldens); then bin_ab on the MiniLM shape with four sides: this build as
# shipped (`off`), PETAL_FUSED_GELU=auto (`auto`: per batch size by load-time timing), =1
# (`all`: fused at every size) and 2ee956c (`base`, .gpu_probe/base/petal.xz), two rounds; then
# the BERT-base shape (768 wide) over one round with `off`, `all`, `rows4`
# (PETAL_NORM_ROWS_PER_BLOCK=4: the warp-per-row norms, not the default at 768) and `base`.
# Bundle: PETAL_BUNDLE_ONLY="petal ops_gpu_test layouts_gpu_test". Carry `.gpu_bundle`,
# `.gpu_probe/base` and models/all-MiniLM-L6-v2/tokenizer.json. ~5 min.
# Results: $OUT/gelu_ab/{ops,layouts_fused}.txt, $OUT/bin_ab-gelu/, $OUT/bin_ab-gelu-base/.
set -uo pipefail
D="$OUT/gelu_ab"
mkdir -p "$D"
rc=0
timeout 150 .gpu_bundle/bin/ops_gpu_test \
  --gtest_filter='GemmBiasGelu*:GemmFusedGpuTest.QkvRope*:GemmFusedGpuTest.MatchesGemmThenSiluMul' \
  > "$D/ops.txt" 2>&1 || rc=1
grep -E '^(minilm|bert-base) m=|^\[  (PASSED|FAILED) |FAILED' "$D/ops.txt" | head -30
PETAL_FUSED_GELU=1 timeout 150 .gpu_bundle/bin/layouts_gpu_test > "$D/layouts_fused.txt" 2>&1 || rc=1
grep -E 'worst cosine|^\[  (PASSED|FAILED) |FAILED' "$D/layouts_fused.txt" | head -20
b=.gpu_probe/base
[[ -x $b/petal ]] || { xz -dk $b/petal.xz && chmod +x $b/petal; }
# A wrapper that runs this build's petal with one environment setting.
wrap() {
  printf '#!/bin/sh\n%s exec %s "$@"\n' "$2" "$PWD/.gpu_bundle/bin/petal" > "/tmp/petal-$1"
  chmod +x "/tmp/petal-$1"
  echo "$1=/tmp/petal-$1"
}
off=off=.gpu_bundle/bin/petal
all=$(wrap all PETAL_FUSED_GELU=1)
BIN_AB_BINS="$off $(wrap auto PETAL_FUSED_GELU=auto) $all base=$b/petal" BIN_AB_SHAPES=minilm \
  BIN_AB_ROUNDS=2 BIN_AB_TAG=gelu timeout 200 bash scripts/gpu/steps/bin_ab.sh || rc=1
BIN_AB_BINS="$off $all $(wrap rows4 PETAL_NORM_ROWS_PER_BLOCK=4) base=$b/petal" \
  BIN_AB_SHAPES=bertbase BIN_AB_ROUNDS=1 BIN_AB_TAG=gelu-base \
  BIN_AB_SCENARIOS=latency_1x128,throughput_1024x128 timeout 150 bash scripts/gpu/steps/bin_ab.sh ||
  rc=1
grep -h "FFN input" "$OUT"/bin_ab-gelu*/*.kernels.txt 2>/dev/null | sort | uniq -c | head
exit $rc
