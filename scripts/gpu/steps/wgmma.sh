#!/usr/bin/env bash
# GPU step (issue 32): the TMA + wgmma split-K GEMM (gemm_wgmma.h). Its correctness cases (every
# tuning candidate forced, against the CPU reference), petal_gemm_bench on the 0.6b shape with the
# kernel among the candidates (per-GEMM medians, the 112-GEMM graph), then `petal bench engine`
# with PETAL_GEMM_WGMMA=0 / 1 alternating (env_ab). Env: WGMMA_ROUNDS (default 2), WGMMA_SCENARIOS.
# Results in $OUT/wgmma/ and $OUT/env_ab/PETAL_GEMM_WGMMA/.
set -uo pipefail
D="$OUT/wgmma"
mkdir -p "$D"
B=.gpu_bundle/bin
rc=0
timeout 180 "$B/ops_gpu_test" --gtest_filter='GemmTuningGpuTest.*:GemmGpuTest.*' > "$D/gemm_tests.txt" 2>&1 || rc=1
grep -E "wgmma|FAILED|PASSED|OK \]" "$D/gemm_tests.txt" | tail -n 20
PETAL_GEMM_WGMMA=1 timeout 120 "$B/petal_gemm_bench" --models 0.6b --ms 1,16,128,512 \
  --out "$D/gemm.json" > "$D/gemm.txt" 2>&1 || rc=1
tail -n 40 "$D/gemm.txt"
AB_VAR=PETAL_GEMM_WGMMA AB_SHAPES=0.6b AB_ROUNDS="${WGMMA_ROUNDS:-2}" \
  AB_SCENARIOS="${WGMMA_SCENARIOS:-latency_1x128,latency_1x512,latency_1x4096,throughput_100x512}" \
  timeout 240 bash scripts/gpu/steps/env_ab.sh || rc=1
exit $rc
