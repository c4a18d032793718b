#!/usr/bin/env bash
# Build and run every test that runs on this machine, then check that the CUDA build compiles.
#   1. build the cpu preset and run `ctest --preset cpu` (all tests except those labelled gpu)
#   2. if nvcc exists: configure + build the cuda preset (compile-only: there is no GPU here,
#      GPU tests run on the GPU machine through scripts/gpu/)
# Environment: PETAL_SKIP_CUDA=1 skips step 2; JOBS=N sets build/test parallelism (default 2).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export JOBS="${JOBS:-2}"

log() { printf '[test %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
t0=$SECONDS

log "== cpu: build"
bash scripts/build.sh cpu
log "== cpu: ctest (excluding label gpu)"
ctest_log="$(mktemp)"
trap 'rm -f "$ctest_log"' EXIT
ctest --preset cpu -j "$JOBS" --timeout 1200 --no-tests=error 2>&1 | tee "$ctest_log"
summary="$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$ctest_log" | tail -1)"
total="$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$summary")"
total="${total:-0}"
failed="$(sed -E 's/.* ([0-9]+) tests failed.*/\1/' <<<"$summary")"
failed="${failed:-0}"
log "cpu tests passed ($((SECONDS - t0))s so far)"

if [[ "${PETAL_SKIP_CUDA:-0}" == 1 ]]; then
  log "== cuda: skipped (PETAL_SKIP_CUDA=1)"
elif command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  log "== cuda: configure + build (compile-only check; no GPU on this machine)"
  bash scripts/build.sh cuda
  log "cuda build OK"
else
  log "== cuda: skipped (no nvcc on this machine)"
fi

log "all done in $((SECONDS - t0))s"
echo "ctest: $((total - failed)) passed, $failed failed"
