#!/usr/bin/env bash
# GPU step (issue 32): programmatic dependent launch through the whole forward pass. Our kernels
# release their dependents right after their wait (pdl.cuh); CUTLASS GEMMs, built with
# CUTLASS_ENABLE_GDC_FOR_SM90, join the chain where cuBLASLt's cannot. First the engine tests under
# the chain (PETAL_PDL=1 PETAL_GEMM_CUTLASS=prefer: races would show as wrong answers; ops_gpu_test
# at the end), then
# `petal bench engine` on the 0.6b shape for these sides, alternating over PDL_ROUNDS rounds:
#   base    PETAL_PDL=0, PETAL_GEMM_CUTLASS=1       (the default build behaviour)
#   pdl     PETAL_PDL=1, PETAL_GEMM_CUTLASS=1       (our kernels chained; cuBLASLt GEMMs break it)
#   cut     PETAL_PDL=0, PETAL_GEMM_CUTLASS=prefer  (CUTLASS GEMMs, no chain)
#   cutpdl  PETAL_PDL=1, PETAL_GEMM_CUTLASS=prefer  (every GEMM and our kernels chained)
#   fused   PETAL_PDL=0, PETAL_GEMM_CUTLASS=prefer, PETAL_FUSED_GEMMS=1  (QKV+norm+rope and
#           gate/up+SwiGLU as fused CUTLASS GEMMs: two kernels fewer a layer)
#   fusedpdl  the same, chained
# A cuDNN attention kernel (where the tuner picks it) is launched without the attribute and
# breaks the chain there.
# Results: $OUT/pdl_chain/0.6b-<side>-r<round>.json (+ the tuner's plans, *.kernels.txt) and
# summary.md (scripts/gpu/ab_table.py). Env: PDL_ROUNDS (2), PDL_SCENARIOS, PDL_SHAPES (0.6b), PDL_SIDES.
set -uo pipefail
D="$OUT/pdl_chain"
mkdir -p "$D"
B=.gpu_bundle/bin
rc=0
chain_test() {  # chain_test BINARY [ENV=VALUE]: one GPU test binary under the chain
  local t=$1 extra=${2:-} log
  [[ -x $B/$t ]] || { echo "$t: not in the bundle"; return; }
  log="$D/$t-chain${extra:+-fused}.log"
  env PETAL_PDL=1 PETAL_GEMM_CUTLASS=prefer $extra $B/$t > "$log" 2>&1 || rc=1
  echo "$t under PETAL_PDL=1 PETAL_GEMM_CUTLASS=prefer $extra: $(grep -E '^\[  (PASSED|FAILED) ' "$log" | tr '\n' ' ')"
}
chain_test cuda_engine_test
chain_test cuda_engine_test PETAL_FUSED_GEMMS=1
SC="${PDL_SCENARIOS:-latency_1x128,latency_1x512,throughput_100x512}"
declare -A ENV=([base]="PETAL_PDL=0 PETAL_GEMM_CUTLASS=1" [pdl]="PETAL_PDL=1 PETAL_GEMM_CUTLASS=1"
                [cut]="PETAL_PDL=0 PETAL_GEMM_CUTLASS=prefer" [cutpdl]="PETAL_PDL=1 PETAL_GEMM_CUTLASS=prefer"
                [fused]="PETAL_PDL=0 PETAL_GEMM_CUTLASS=prefer PETAL_FUSED_GEMMS=1"
                [fusedpdl]="PETAL_PDL=1 PETAL_GEMM_CUTLASS=prefer PETAL_FUSED_GEMMS=1")
for shape in ${PDL_SHAPES:-0.6b}; do
  M=/tmp/petal-models/$shape-bidirectional
  [[ -f $M/model.safetensors ]] ||
    petal make-model --shape pplx-embed-v1-$shape --attention bidirectional --out $M >/dev/null
  for r in $(seq 1 "${PDL_ROUNDS:-2}"); do
    for side in ${PDL_SIDES:-base pdl cut cutpdl fused fusedpdl}; do
      echo "== $shape $side (${ENV[$side]}) round $r"
      env ${ENV[$side]} petal bench engine --model $M --backend cuda --max-batch-tokens 32768 \
        --max-batch-seqs 128 --seconds "${PETAL_BENCH_SECONDS:-2}" --scenarios "$SC" \
        --out "$D/$shape-$side-r$r.json" | grep -E 'latency|throughput|check' || rc=1
    done
  done
done
python3 scripts/gpu/ab_table.py "$D" || rc=1
chain_test ops_gpu_test  # last: the longest (every GEMM candidate against float64)
exit $rc
