#!/usr/bin/env bash
# Build and run every test that runs on this machine, then check that the CUDA build compiles.
#   1. build the cpu preset and run `ctest --preset cpu` (all tests except labels gpu and soak)
#   2. soak: `ctest --preset soak` (PETAL_SOAK_SECONDS of load on `petal serve`; 60 here, the
#      test's own default of 120 and longer runs on demand: docs/reliability.md)
#   3. fuzz: scripts/fuzz.sh, every libFuzzer target for PETAL_FUZZ_SECONDS each (10 here; the
#      script's own default is 30, long runs on demand: docs/reliability.md)
#   4. asan: the whole cpu test suite under ASan + UBSan (preset asan)
#   5. tsan: the threaded server and gateway tests (label tsan) under ThreadSanitizer
#   6. if nvcc exists: configure + build the cuda preset (compile-only: there is no GPU here,
#      GPU tests run on the GPU machine through scripts/gpu/)
# Environment: PETAL_SKIP_SOAK=1, PETAL_SKIP_FUZZ=1, PETAL_SKIP_ASAN=1, PETAL_SKIP_TSAN=1 and
# PETAL_SKIP_CUDA=1 skip steps 2-6; JOBS=N sets build/test parallelism (default 2).
# Compiles go through ccache when it is installed (CMakeLists.txt): the cuda preset then reuses
# the cpu preset's host objects. At the end a table gives each step's wall time.
# docs/reliability.md describes steps 2-5 and longer runs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export JOBS="${JOBS:-2}"
export PETAL_SOAK_SECONDS="${PETAL_SOAK_SECONDS:-60}"
export PETAL_FUZZ_SECONDS="${PETAL_FUZZ_SECONDS:-10}"
# ccache keys on paths below the checkout, so two clones share hits.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
# The asan, tsan and fuzz builds carry line tables, and for such compiles ccache also hashes the
# build folder's path: a clone elsewhere missed every one of their objects (asan 800-1,000 s cold).
# Without it their debug info may name the folder of the clone that filled the cache: harmless.
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

log() { printf '[test %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
t0=$SECONDS
# The step table printed at the end (and on failure): name, seconds.
step_names=()
step_secs=()
mark=$SECONDS
done_step() {  # done_step NAME: records the time since the previous mark
  step_names+=("$1")
  step_secs+=($((SECONDS - mark)))
  mark=$SECONDS
}
print_steps() {
  printf '\n%-22s %8s\n' "step" "seconds"
  local i
  for i in "${!step_names[@]}"; do printf '%-22s %8s\n' "${step_names[$i]}" "${step_secs[$i]}"; done
  printf '%-22s %8s\n' "total" "$((SECONDS - t0))"
}
trap 'rc=$?; rm -f "${ctest_log:-}"; ((rc == 0)) || { log "FAILED after $((SECONDS - t0))s"; print_steps; }' EXIT

# Disk: every build folder stays under build/ (asan is the largest). A full disk shows up as a
# linker error deep in a build, so say up front how much room there is.
avail_gib=$(( $(df -Pk . | awk 'NR == 2 {print $4}') / 1048576 ))
log "disk: ${avail_gib} GiB free here; a full run writes about 6 GiB under build/ (asan 4.2)"
if ((avail_gib < 6)); then log "warning: less than 6 GiB free; builds may fail with 'No space left on device'"; fi

log "== cpu: build"
bash scripts/build.sh cpu
done_step "cpu build"
log "== cpu: ctest (excluding label gpu)"
ctest_log="$(mktemp)"
ctest --preset cpu -j "$JOBS" --timeout 1200 --no-tests=error 2>&1 | tee "$ctest_log"
summary="$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$ctest_log" | tail -1)"
total="$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$summary")"
total="${total:-0}"
failed="$(sed -E 's/.* ([0-9]+) tests failed.*/\1/' <<<"$summary")"
failed="${failed:-0}"
log "cpu tests passed ($((SECONDS - t0))s so far)"
done_step "cpu ctest"

step() {  # step NAME SKIP_VAR: logs and returns 1 when the step is skipped
  if [[ "${!2:-0}" == 1 ]]; then
    log "== $1: skipped ($2=1)"
    return 1
  fi
  log "== $1 ($((SECONDS - t0))s so far)"
}
if step soak PETAL_SKIP_SOAK; then
  ctest --preset soak --no-tests=error
  done_step "soak (${PETAL_SOAK_SECONDS}s)"
fi
if step fuzz PETAL_SKIP_FUZZ; then
  bash scripts/fuzz.sh
  done_step "fuzz (${PETAL_FUZZ_SECONDS}s/target)"
fi
if step asan PETAL_SKIP_ASAN; then
  bash scripts/build.sh asan -DPETAL_BENCH=OFF
  done_step "asan build"
  ctest --preset asan -j "$JOBS" --timeout 1800 --no-tests=error
  done_step "asan ctest"
fi
if step tsan PETAL_SKIP_TSAN; then
  # Only the tests labelled tsan are built (and run): the threaded server and gateway paths.
  cmake --preset tsan >/dev/null
  tsan_targets=$(ctest --preset tsan -N 2>/dev/null | sed -nE 's/^ *Test +#[0-9]+: ([a-z0-9_]+)$/\1/p')
  cmake --build --preset tsan -j "$JOBS" --target $tsan_targets
  done_step "tsan build"
  ctest --preset tsan -j "$JOBS" --timeout 1200 --no-tests=error
  done_step "tsan ctest"
fi

if [[ "${PETAL_SKIP_CUDA:-0}" == 1 ]]; then
  log "== cuda: skipped (PETAL_SKIP_CUDA=1)"
elif command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
  log "== cuda: configure + build (compile-only check; no GPU on this machine)"
  bash scripts/build.sh cuda
  done_step "cuda build"
  log "cuda build OK"
  if command -v ccache >/dev/null 2>&1; then ccache -s | grep -E '^ *(Hits|Misses)' || true; fi
else
  log "== cuda: skipped (no nvcc on this machine)"
fi

log "all done in $((SECONDS - t0))s"
print_steps
echo "ctest: $((total - failed)) passed, $failed failed"
