#!/usr/bin/env bash
# GPU step (issue 32, session 28): where the fused GEMMs' CUTLASS main loop loses to cuBLASLt at
# large M (SwiGLU 1.2-1.5x slower at 18-32K tokens of the 0.6b shape). Four probes in one call:
#   1. ops_gpu_test's fused timing cases (SwiGLU and QKV) at the defaults, with every GEMM tuning's
#      candidate medians logged (PETAL_GEMM_TUNE_LOG=1: does the tuner pick the fastest?);
#   2. the same SwiGLU case with the epilogue storing nothing (PETAL_FUSED_PROBE=nostore): the main
#      loop alone; and both again with .gpu_probe/s28a's ops_gpu_test (the SwiGLU epilogue before
#      its rewrite: exact divide, a 3-shuffle transpose, the layout checked on every tile);
#   3. the persistent scheduler's tile order swept (PETAL_FUSED_SCHED="swizzle,raster");
#   4. the best order of 3 end to end: 0.6b 1 x 4096 and 100 x 512 with the fused GEMMs on for
#      batches of >= 4096 tokens, against the default build (bin_ab, two rounds);
#   then swiglu_ncu (Nsight full sections of one fused launch and one cuBLASLt launch).
# Bundle: PETAL_BUNDLE_ONLY="petal ops_gpu_test". Carry `.gpu_bundle` and `.gpu_probe/s28a`.
# ~8 min.
set -uo pipefail
rc=0
D="$OUT/s28_probe"
mkdir -p "$D"
B=.gpu_bundle/bin/ops_gpu_test
SW=GemmFusedGpuTest.TimingFusedVsGemmThenSiluMul
QKV=GemmFusedGpuTest.TimingFusedQkvVsGemmThenQkNormRope
big() { grep -E '^q(0.6b|4b) m=(4096|18432|32768):' "$1"; }
# Every fused configuration (SwiGLU C256x2 is new) against the CPU reference first.
timeout 180 $B --gtest_filter='GemmFused*:GemmBiasGelu*:-*Timing*' > "$D/correctness.txt" 2>&1 || rc=1
grep -E '^\[  (PASSED|FAILED) |FAILED' "$D/correctness.txt" | head -10
PETAL_GEMM_TUNE_LOG=1 timeout 120 $B --gtest_filter="$SW:$QKV" > "$D/default.txt" 2>&1 || rc=1
echo "== default"; big "$D/default.txt"
PETAL_FUSED_PROBE=nostore timeout 60 $B --gtest_filter="$SW" > "$D/nostore.txt" 2>&1 || rc=1
echo "== nostore (main loop alone)"; big "$D/nostore.txt"
O=.gpu_probe/s28a/ops_gpu_test
[[ -x $O ]] || { xz -dk $O.xz && chmod +x $O; }
timeout 60 $O --gtest_filter="$SW" > "$D/old_default.txt" 2>&1 || rc=1
echo "== old epilogue"; big "$D/old_default.txt"
PETAL_FUSED_PROBE=nostore timeout 60 $O --gtest_filter="$SW" > "$D/old_nostore.txt" 2>&1 || rc=1
echo "== old nostore"; big "$D/old_nostore.txt"
for s in 1,1 1,2 4,1 4,2 8,1 8,2; do
  PETAL_FUSED_SCHED=$s timeout 120 $B --gtest_filter="$SW:$QKV" > "$D/sched_$s.txt" 2>&1 || rc=1
  echo "== sched $s"; big "$D/sched_$s.txt"
done
# The order whose SwiGLU C256x1 at q0.6b m=32768 was fastest (default "1,0" if none beat it).
best=$(for f in "$D"/default.txt "$D"/sched_*.txt; do
  t=$(grep -m1 '^q0.6b m=32768: cuBLASLt+SiluMul' "$f" | sed -E 's/.*swiglu\/C256x1 ([0-9.]+) us.*/\1/')
  s=$(basename "$f" .txt); s=${s#sched_}; [[ $s == default ]] && s=1,0
  [[ -n $t ]] && echo "$t $s"
done | sort -n | head -1 | cut -d' ' -f2)
echo "best order: ${best:-1,0}"
wrap() {  # name env...: this build's petal under the given environment
  local n=$1; shift
  printf '#!/bin/sh\nexec env %s %s "$@"\n' "$*" "$PWD/.gpu_bundle/bin/petal" > "/tmp/petal-$n"
  chmod +x "/tmp/petal-$n"
  echo "$n=/tmp/petal-$n"
}
sides="default=.gpu_bundle/bin/petal $(wrap fused PETAL_FUSED_GEMMS=4096)"
sides+=" $(wrap fusedbest PETAL_FUSED_GEMMS=4096 PETAL_FUSED_SCHED=${best:-1,0})"
BIN_AB_BINS="$sides" BIN_AB_SHAPES=0.6b BIN_AB_ROUNDS=2 BIN_AB_TAG=fused \
  BIN_AB_SCENARIOS=latency_1x4096,throughput_100x512 timeout 240 bash scripts/gpu/steps/bin_ab.sh ||
  rc=1
timeout 220 bash scripts/gpu/steps/swiglu_ncu.sh || rc=1
exit $rc
