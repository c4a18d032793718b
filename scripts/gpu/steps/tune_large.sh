#!/usr/bin/env bash
# GPU step (issue 32): tuning the large-M GEMMs (GemmOptions::tune_large_bytes;
# PETAL_GEMM_TUNE_LARGE_MB=N tunes problems whose output is up to N MiB in a buffer of their own,
# where by default they keep cuBLASLt's first choice). The tuning test, then `petal bench engine`
# with PETAL_GEMM_TUNE_LARGE_MB=0 / 2048 alternating (env_ab) on the throughput scenario.
# Env: LARGE_ROUNDS (default 1), LARGE_SHAPES (default "0.6b 4b"), LARGE_SCENARIOS.
# Results in $OUT/tune_large/ and $OUT/env_ab/PETAL_GEMM_TUNE_LARGE_MB/.
set -uo pipefail
D="$OUT/tune_large"
mkdir -p "$D"
rc=0
timeout 60 .gpu_bundle/bin/ops_gpu_test --gtest_filter='GemmTuningGpuTest.LargeOutputs*' \
  > "$D/test.txt" 2>&1 || rc=1
grep -E "FAILED|PASSED|OK \]" "$D/test.txt" | tail -n 4
AB_VAR=PETAL_GEMM_TUNE_LARGE_MB AB_VALUES="0 2048" AB_SHAPES="${LARGE_SHAPES:-0.6b 4b}" \
  AB_ROUNDS="${LARGE_ROUNDS:-1}" AB_SCENARIOS="${LARGE_SCENARIOS:-throughput_100x512}" \
  timeout 400 bash scripts/gpu/steps/env_ab.sh || rc=1
exit $rc
