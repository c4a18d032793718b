#!/usr/bin/env bash
# GPU step: compute-sanitizer memcheck and racecheck over the op tests (the custom kernels, the
# graph-replayed GEMM, and the attention kernels on small ragged batches). Logs in $OUT/sanitizer/.
set -uo pipefail
mkdir -p "$OUT/sanitizer"
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
B=.gpu_bundle/bin
status=0
run() {  # name binary filter [tools]
  for tool in ${4:-memcheck racecheck}; do
    timeout 240 "$san" --tool "$tool" --error-exitcode 3 "$B/$2" --gtest_filter="$3" > "$OUT/sanitizer/$1-$tool.log" 2>&1
    rc=$?
    echo "$1 $tool: exit $rc ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer/$1-$tool.log" | tail -1))"
    [ "$rc" -eq 0 ] || status=1
  done
}
run ops ops_gpu_test 'OpsGpuTest.*:OpsGpuTest2.*:OpsGpuTest3.*:GemmGpuTest.UnalignedPointersAndGraphReplay'
run attention attention_gpu_test 'ReferenceAttention.*:FlashAttention.SmallBatchUnderLargeCapacity:FlashAttention.CudaGraphReplayWithDifferentBatches:All/FlashVsCpu.MixedRaggedBatch/0'
# cuDNN's kernels and the whole engine (graphs, ring slots, attention choice): memcheck only
# (racecheck on NVIDIA's own kernels is not ours to fix and takes long).
run cudnn attention_gpu_test 'All/CudnnVsCpu.MixedRaggedBatch/1' memcheck
run engine cuda_engine_test '*' memcheck
exit $status
