#!/usr/bin/env bash
# GPU step (issue 32, session 24): the two tuner switches of this session in one call. The GEMM
# tuning tests; petal_gemm_bench (0.6b) with lone and chained tuning, whose 112-GEMM graph is the
# judge; then bin_ab with three sides alternating: this build with its defaults (`new`), this
# build with PETAL_GEMM_TUNE_CHAIN=512 and PETAL_GEMM_TUNE_LARGE_MB=2048 (`tuned`, a wrapper
# script), and the 2ee956c build (`base`, .gpu_probe/base/petal.xz unpacked here).
# Env: TUNING_SHAPES (default "0.6b 4b minilm"), TUNING_ROUNDS (default 1), TUNING_CHAIN_M (512),
# TUNING_LARGE_MB (2048). Results in $OUT/tune_chain/ and $OUT/bin_ab-tuning/.
set -uo pipefail
D="$OUT/tune_chain"
mkdir -p "$D"
B=.gpu_bundle/bin
rc=0
timeout 150 "$B/ops_gpu_test" --gtest_filter='GemmTuningGpuTest.*' > "$D/gemm_tests.txt" 2>&1 || rc=1
grep -E "chained|FAILED|PASSED|OK \]" "$D/gemm_tests.txt" | tail -n 16
for v in 0 "${TUNING_CHAIN_M:-512}"; do
  PETAL_GEMM_TUNE_CHAIN=$v timeout 100 "$B/petal_gemm_bench" --models 0.6b --ms 1,128,512 \
    --graph-ms 1,128,512 --out "$D/gemm-chain$v.json" > "$D/gemm-chain$v.txt" 2>&1 || rc=1
  echo "== petal_gemm_bench PETAL_GEMM_TUNE_CHAIN=$v"
  grep -E "graph|chained" "$D/gemm-chain$v.txt" | tail -n 12
done
[[ -x .gpu_probe/base/petal ]] || { xz -dk .gpu_probe/base/petal.xz && chmod +x .gpu_probe/base/petal; }
W=/tmp/petal-tuned
printf '#!/usr/bin/env bash\nPETAL_GEMM_TUNE_CHAIN=%s PETAL_GEMM_TUNE_LARGE_MB=%s exec %s "$@"\n' \
  "${TUNING_CHAIN_M:-512}" "${TUNING_LARGE_MB:-2048}" "$PWD/$B/petal" > $W
chmod +x $W
BIN_AB_BINS="new=$B/petal tuned=$W base=.gpu_probe/base/petal" BIN_AB_TAG=tuning \
  BIN_AB_SHAPES="${TUNING_SHAPES:-0.6b 4b minilm}" BIN_AB_ROUNDS="${TUNING_ROUNDS:-1}" \
  bash scripts/gpu/steps/bin_ab.sh || rc=1
exit $rc
