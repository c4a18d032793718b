#!/usr/bin/env bash
# Configure and build one CMake preset (default: cpu). Binaries land in build/<preset>/bin/.
#   bash scripts/build.sh            # CPU-only build, no CUDA needed
#   bash scripts/build.sh cuda       # CUDA build (needs nvcc at /usr/local/cuda)
#   bash scripts/build.sh asan       # Debug + ASan/UBSan
# Extra arguments after the preset go to the configure step (e.g. -DPETAL_BENCH=OFF).
# JOBS=N sets build parallelism (default: number of cores, at most 2 unless JOBS is set).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

preset="${1:-cpu}"
shift || true
cores="$(nproc 2>/dev/null || echo 2)"
jobs="${JOBS:-$(( cores < 2 ? cores : 2 ))}"

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

if [[ "$preset" == cuda* ]] && ! command -v nvcc >/dev/null 2>&1 && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "[build] ERROR: preset '$preset' needs nvcc (CUDA toolkit at /usr/local/cuda)" >&2
  exit 1
fi

t0=$SECONDS
log "configure preset '$preset' $*"
cmake --preset "$preset" "$@"
log "build preset '$preset' with $jobs jobs"
cmake --build --preset "$preset" -j "$jobs"
log "done in $((SECONDS - t0))s: $(ls build/"$preset"/bin 2>/dev/null | tr '\n' ' ')"
