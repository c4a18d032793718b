#!/usr/bin/env bash
# GPU step (issue 32): the persistent-kernel budget probe (bench/persistent_probe.cu). Grid-barrier
# latency (ours and cooperative_groups', 1 and 2 CTAs per SM), then the 112 GEMMs of the 0.6b
# shape at M = 16, 64 and 128: cuBLASLt in one CUDA graph against one cooperative persistent
# kernel with the next phase's weights prefetched 2 / 1 / 0 phases ahead (and with cg's grid sync),
# correctness against cuBLASLt first (timing skipped on FAIL), per-phase globaltimer stamps.
# The binary is built on the build machine, not here:
#   nvcc -O3 -std=c++17 -arch=sm_90a bench/persistent_probe.cu -lcublasLt -o .gpu_probe/persistent_probe
# and carried in .gpu_probe/. PROBE_MS overrides the token counts, PROBE_ARGS adds flags (e.g.
# "--tiles qkv=64x2,o=64x8,gu=96x2,down=64x8"). Under a minute.
# Results: $OUT/persistent_probe/probe.json (everything printed), probe.log.
set -uo pipefail
D="$OUT/persistent_probe"
mkdir -p "$D"
BIN=.gpu_probe/persistent_probe
[[ -x $BIN ]] || { echo "$BIN is not here (build it on the build machine and carry .gpu_probe)"; exit 1; }
# cuBLASLt: the bundle's copy when there is one (LD_LIBRARY_PATH), else the system's.
timeout 300 $BIN --ms "${PROBE_MS:-16,64,128}" --out "$D/probe.json" ${PROBE_ARGS:-} > "$D/probe.log" 2>&1
rc=$?
cat "$D/probe.log"
((rc == 0)) || echo "persistent_probe failed (rc=$rc)"
exit $rc
