#!/usr/bin/env bash
# GPU step (issue 32): an A/B of one environment switch in one binary, e.g. the CUTLASS GEMM
# candidates (PETAL_GEMM_CUTLASS=0/1) or the folded norms (PETAL_FOLD_NORMS=0/1):
# `petal bench engine` on random-weight shapes for each value, alternating over AB_ROUNDS rounds
# so drift shows. Every run does the warm-up check against the CPU reference. Results JSON (and
# the tuner's plan table, *.json.kernels.txt) in $OUT/env_ab/<var>/<shape>-v<value>-r<round>.json,
# a table in $OUT/env_ab/<var>/summary.md.
# Env: AB_VAR (default PETAL_GEMM_CUTLASS), AB_VALUES (default "0 1"), AB_SHAPES (default
# "0.6b 4b"), AB_ROUNDS (default 2), AB_EXTRA_ENV (e.g. "PETAL_PDL=1", applied to all),
# AB_ENGINE_ARGS (extra `petal bench engine` flags, e.g. "--quantize fp8 --no-fp8-gate"),
# AB_SCENARIOS (replaces the per-shape scenario list), AB_TAG (suffix of the results folder).
set -euo pipefail
VAR="${AB_VAR:-PETAL_GEMM_CUTLASS}"
D="$OUT/env_ab/$VAR${AB_TAG:+-$AB_TAG}"
mkdir -p "$D"
SECS="${PETAL_BENCH_SECONDS:-2}"
for shape in ${AB_SHAPES:-0.6b 4b}; do
  M=/tmp/petal-models/$shape-bidirectional
  [[ -f $M/model.safetensors ]] ||
    petal make-model --shape pplx-embed-v1-$shape --attention bidirectional --out $M >/dev/null
  sc=latency_1x128,latency_1x512,latency_1x4096,latency_5x512,throughput_100x512
  [[ $shape == 4b ]] && sc=latency_1x128,latency_1x512,throughput_100x512
  [[ -n "${AB_SCENARIOS:-}" ]] && sc=$AB_SCENARIOS
  for r in $(seq 1 "${AB_ROUNDS:-2}"); do
    for v in ${AB_VALUES:-0 1}; do
      echo "== $shape $VAR=$v round $r"
      env ${AB_EXTRA_ENV:-} "$VAR=$v" petal bench engine --model $M --backend cuda \
        --max-batch-tokens 32768 --max-batch-seqs 128 --seconds "$SECS" --scenarios $sc ${AB_ENGINE_ARGS:-} \
        --out "$D/$shape-v$v-r$r.json" | grep -E 'latency|throughput|check' || true
    done
  done
done
python3 scripts/gpu/ab_table.py "$D" --label "$VAR="
