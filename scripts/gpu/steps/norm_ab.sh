#!/usr/bin/env bash
# GPU step (issue 32, session 25): the two norm-kernel changes of session 25, neither run on a GPU
# when written. First `ops_gpu_test --gtest_filter='OpsGpuTest.Add*Norm*'` (both kernel layouts
# against the CPU references), then bin_ab with four sides: this build (`fixed`: PdlWait without
# griddepcontrol.launch_dependents), this build with PETAL_NORM_ROWS_PER_BLOCK=4 (`rows4`: the
# warp-per-row norms, a wrapper script), 83522a8 (`prev`, .gpu_probe/prev/petal.xz) and 2ee956c
# (`base`, .gpu_probe/base/petal.xz): MiniLM over two rounds, then 0.6b (1 x 128, 1 x 512,
# 100 x 512) over one. Bundle: PETAL_BUNDLE_ONLY="petal ops_gpu_test". Carry `.gpu_bundle`,
# `.gpu_probe` and models/all-MiniLM-L6-v2/tokenizer.json. ~4 min.
# Results: $OUT/norm_ab/ops.txt, $OUT/bin_ab-{minilm,0.6b}/.
set -uo pipefail
mkdir -p "$OUT/norm_ab"
rc=0
timeout 120 .gpu_bundle/bin/ops_gpu_test --gtest_filter='OpsGpuTest.Add*Norm*' \
  > "$OUT/norm_ab/ops.txt" 2>&1 || rc=1
grep -E '^\[  (PASSED|FAILED) |FAILED' "$OUT/norm_ab/ops.txt" | head -20
for b in prev base; do
  [[ -x .gpu_probe/$b/petal ]] || { xz -dk .gpu_probe/$b/petal.xz && chmod +x .gpu_probe/$b/petal; }
done
W=/tmp/petal-rows4
printf '#!/bin/sh\nPETAL_NORM_ROWS_PER_BLOCK=4 exec %s "$@"\n' "$PWD/.gpu_bundle/bin/petal" > $W
chmod +x $W
export BIN_AB_BINS="fixed=.gpu_bundle/bin/petal rows4=$W prev=.gpu_probe/prev/petal base=.gpu_probe/base/petal"
BIN_AB_SHAPES=minilm BIN_AB_ROUNDS=2 BIN_AB_TAG=minilm timeout 150 bash scripts/gpu/steps/bin_ab.sh || rc=1
BIN_AB_SHAPES=0.6b BIN_AB_ROUNDS=1 BIN_AB_TAG=0.6b \
  BIN_AB_SCENARIOS=latency_1x128,latency_1x512,throughput_100x512 \
  timeout 180 bash scripts/gpu/steps/bin_ab.sh || rc=1
exit $rc
