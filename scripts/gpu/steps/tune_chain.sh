#!/usr/bin/env bash
# GPU step (issue 32): chained GEMM tuning (gemm_chain.h; PETAL_GEMM_TUNE_CHAIN=M times the
# candidates of M <= M as graph-captured chains over copies of the weights instead of lone
# launches). The GEMM tuning tests, petal_gemm_bench on the 0.6b shape with lone and chained
# tuning (its 112-GEMM graph is the judge), then `petal bench engine` with
# PETAL_GEMM_TUNE_CHAIN=0 / 512 alternating (env_ab). Env: CHAIN_ROUNDS (default 2),
# CHAIN_SCENARIOS, CHAIN_SHAPES (default 0.6b). Results in $OUT/tune_chain/ and
# $OUT/env_ab/PETAL_GEMM_TUNE_CHAIN/.
set -uo pipefail
D="$OUT/tune_chain"
mkdir -p "$D"
B=.gpu_bundle/bin
rc=0
timeout 150 "$B/ops_gpu_test" --gtest_filter='GemmTuningGpuTest.*' > "$D/gemm_tests.txt" 2>&1 || rc=1
grep -E "chained|m=|FAILED|PASSED|OK \]" "$D/gemm_tests.txt" | tail -n 24
for v in 0 512; do
  PETAL_GEMM_TUNE_CHAIN=$v timeout 120 "$B/petal_gemm_bench" --models 0.6b --ms 1,16,128,512 \
    --graph-ms 1,16,128,512 --out "$D/gemm-chain$v.json" > "$D/gemm-chain$v.txt" 2>&1 || rc=1
  echo "== petal_gemm_bench PETAL_GEMM_TUNE_CHAIN=$v"
  grep -iE "graph|0\.6b" "$D/gemm-chain$v.txt" | tail -n 24
done
AB_VAR=PETAL_GEMM_TUNE_CHAIN AB_VALUES="0 512" AB_SHAPES="${CHAIN_SHAPES:-0.6b}" \
  AB_ROUNDS="${CHAIN_ROUNDS:-2}" \
  AB_SCENARIOS="${CHAIN_SCENARIOS:-latency_1x128,latency_1x512,throughput_100x512}" \
  timeout 300 bash scripts/gpu/steps/env_ab.sh || rc=1
exit $rc
