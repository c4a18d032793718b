#!/usr/bin/env bash
# Runs the GPU op tests on a machine with a CUDA device: the full suite (summary table + JSON
# report), then compute-sanitizer memcheck and racecheck on the custom kernels (the GEMM model
# shapes are left out there: cuBLAS under the sanitizer is slow and not ours to race-check).
# Usage: tests/ops/run_gpu.sh [build_dir] [out_dir]   (defaults: build/cuda, ${OUT:-.})
set -u
build=${1:-build/cuda}
out=${2:-${OUT:-.}}
bin="$build/tests/ops/ops_gpu_test"
mkdir -p "$out"
status=0
PETAL_OPS_REPORT="$out/ops_report.json" "$bin" 2>&1 | tee "$out/ops_gpu_test.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
filter='OpsGpuTest.*:OpsGpuTest2.*:GemmGpuTest.UnalignedPointersAndGraphReplay'
for tool in memcheck racecheck; do
  "$sanitizer" --tool "$tool" --error-exitcode 3 "$bin" --gtest_filter="$filter" \
    >"$out/sanitizer_$tool.log" 2>&1
  rc=$?
  echo "compute-sanitizer $tool: exit $rc ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | tail -1))"
  [ "$rc" -eq 0 ] || status=1
done
exit $status
