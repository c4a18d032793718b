#!/usr/bin/env bash
# GPU step (issue 32, session 27): why the fused gate/up + SwiGLU GEMM (CUTLASS main loop, our
# register epilogue) is ~1.5x slower than cuBLASLt's GEMM at 32,768 tokens of the 0.6b shape
# (sessions 12 and 26: 801-820 us against 663-719 for cuBLASLt + SiluMul). Nsight Compute's full
# section set on one launch of each, from ops_gpu_test's timing case (q0.6b m=32768, the 5th
# shape; each (shape, config) is 3 warm-up + 20 timed launches; the fused configs run in the
# order C256x1, P256x1, P128x1, C256x2, so 4 x 92 + 3 fused launches come before the one
# profiled), and a cuBLASLt kernel of the same shape (the grid and duration in the report show
# which it is).
# Bundle: any with ops_gpu_test. Carry `.gpu_bundle`. ~3 min. Results: $OUT/swiglu_ncu/*.txt.
set -uo pipefail
D="$OUT/swiglu_ncu"
mkdir -p "$D"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
[[ -n "$NCU" ]] || { echo "ncu not found"; exit 1; }
T=(.gpu_bundle/bin/ops_gpu_test --gtest_filter=GemmFusedGpuTest.TimingFusedVsGemmThenSiluMul)
rc=0
prof() {  # name regex skip [ncu flags]
  timeout 240 "$NCU" --set full "${@:4}" --kernel-name "regex:$2" --launch-skip "$3" --launch-count 1 \
    "${T[@]}" > "$D/$1.txt" 2> "$D/$1.err" || { echo "ncu $1 failed"; tail -5 "$D/$1.err"; rc=1; }
  grep -E 'Duration|Grid Size|Registers Per|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit|Achieved Occupancy|Executed Ipc A|  [a-z_]*nvjet|device_kernel' "$D/$1.txt" | head -20
}
# The fused kernels are CUTLASS's `device_kernel<...>`, named by their epilogue only in the
# demangled name. cuBLASLt's: the Gemm tunes each new shape first (8 launches a candidate), so
# the index comes from session 27's list (nvjet_all.csv): launches 464-519 are q0.6b m=32768's
# candidates, 520-542 the chosen one's 3 warm-up and 20 timed launches (a 128 x 160 tile there;
# the tuner's pick can differ between runs, which the name in the report shows).
prof fused_c256 SwigluEpilogue 371 --kernel-name-base demangled
prof cublaslt nvjet 523
# Every cuBLASLt launch's duration and grid, to check which shape the one above was.
timeout 120 "$NCU" --metrics gpu__time_duration.sum,launch__grid_size --csv \
  --kernel-name regex:nvjet "${T[@]}" > "$D/nvjet_all.csv" 2> "$D/nvjet_all.err" || rc=1
grep -c nvjet "$D/nvjet_all.csv"
exit $rc
