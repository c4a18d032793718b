#!/usr/bin/env bash
# GPU step (issue 32): L2 hints (ops.h L2Hint; PETAL_L2_HINTS=0/1/2 in the Qwen3 bf16 forward).
#  1. ops_gpu_test's L2Prefetch* cases (hinted kernels give the same bits as unhinted ones);
#  2. petal_gemm_bench on the 0.6b shape at M = 128 / 512, weights evicted and kept warm: how fast
#     the GEMMs could be if their weights were in L2 when they start;
#  3. env_ab over PETAL_L2_HINTS (0 = off, 1 = hints, 2 = hints + GEMMs tuned with L2 warm).
# Env: HINT_SHAPES (default 0.6b), HINT_ROUNDS (default 2), HINT_SCENARIOS, HINT_VALUES.
# Results: $OUT/l2_hints/ and $OUT/env_ab/PETAL_L2_HINTS/.
set -uo pipefail
D="$OUT/l2_hints"
mkdir -p "$D"
rc=0
ops_gpu_test --gtest_filter='L2Prefetch*' > "$D/ops_gpu_test.log" 2>&1 || rc=1
tail -4 "$D/ops_gpu_test.log"
for mode in evicted warm; do
  extra=(); [[ $mode == warm ]] && extra=(--hot)
  timeout 240 petal_gemm_bench --models 0.6b --ms 128,512 --graph-ms 128,512 --iters 20 "${extra[@]}" \
    --out "$D/gemm-$mode.json" > "$D/gemm-$mode.txt" 2>&1 || { tail -3 "$D/gemm-$mode.txt"; rc=1; }
  grep -iE "graph|112" "$D/gemm-$mode.txt" | head -4
done
AB_VAR=PETAL_L2_HINTS AB_VALUES="${HINT_VALUES:-0 1 2}" AB_SHAPES="${HINT_SHAPES:-0.6b}" \
  AB_ROUNDS="${HINT_ROUNDS:-2}" \
  AB_SCENARIOS="${HINT_SCENARIOS:-latency_1x128,latency_1x512,latency_5x512,throughput_16x512}" \
  bash "$PETAL_SOURCE_DIR/scripts/gpu/steps/env_ab.sh" || rc=1
exit $rc
