#!/usr/bin/env bash
# Build what the GPU machine runs and pack it into .gpu_bundle/ (git-ignored):
#   .gpu_bundle/bundle.tar.xz   bin/ and lib/, compressed (OpenBLAS alone is 36 MB raw, ~6 MB packed):
#       bin/  every executable in <build>/bin (petal, ...) + every test labelled `gpu`
#       lib/  the non-system, non-CUDA shared libraries they need (as ldd resolves them here)
#   .gpu_bundle/tests.tsv       name <TAB> binary <TAB> args   (what run_on_device.sh runs)
#   .gpu_bundle/MANIFEST.json   commit, arch, files with sizes and sha256
# run_on_device.sh unpacks the archive into .gpu_bundle/bin and .gpu_bundle/lib on the GPU machine.
#
# The GPU machine (Ubuntu 24.04, glibc 2.39, CUDA 13) has glibc, libstdc++ and the CUDA libraries
# itself: those are not shipped. Carry the bundle with the run tool (carry: [".gpu_bundle"]) and run
#   bash scripts/gpu/run_on_device.sh tests
#
# usage: bash scripts/gpu/bundle.sh [--no-build]
# env:   PETAL_BUNDLE_ARCH (default 90a-real: the H200 only), PETAL_BUNDLE_BUILD_DIR (default build/cuda-sm90),
#        JOBS (default 2), PETAL_BUNDLE_ONLY (space-separated targets, e.g. "petal attention_gpu_test":
#        only those binaries and gpu tests; with the build, only those targets are built: a slim
#        bundle leaves room in the carry for tokenizers or a second build)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

ARCH="${PETAL_BUNDLE_ARCH:-90a-real}"
BUILD="${PETAL_BUNDLE_BUILD_DIR:-build/cuda-sm90}"
JOBS="${JOBS:-2}"
DEST=".gpu_bundle"
STAGE="$BUILD/bundle-stage"   # unpacked bin/ + lib/, kept here for inspection
BUDGET_MIB=48   # the run tool carries at most 64 MiB per call (work tree + carried paths together)

log() { printf '[bundle %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { printf '[bundle] ERROR: %s\n' "$*" >&2; exit 1; }

build=1
[[ "${1:-}" == "--no-build" ]] && build=0

if ((build)); then
  command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]] || die "nvcc not found"
  log "configure $BUILD (preset cuda, CMAKE_CUDA_ARCHITECTURES=$ARCH)"
  cmake --preset cuda -B "$BUILD" -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DCMAKE_BUILD_TYPE=Release >/dev/null
  log "build with $JOBS jobs"
  # shellcheck disable=SC2086  # PETAL_BUNDLE_ONLY is a list of targets
  cmake --build "$BUILD" -j "$JOBS" ${PETAL_BUNDLE_ONLY:+--target $PETAL_BUNDLE_ONLY}
fi
[[ -d "$BUILD/bin" ]] || die "$BUILD/bin missing (build first, or drop --no-build)"

rm -rf "$DEST" "$STAGE"
mkdir -p "$DEST" "$STAGE/bin" "$STAGE/lib"

# 1. Binaries: everything executable in <build>/bin, then every test labelled gpu (from CTest itself).
bins=()
for f in "$BUILD"/bin/*; do
  [[ -f "$f" && -x "$f" ]] || continue
  [[ -z "${PETAL_BUNDLE_ONLY:-}" || " $PETAL_BUNDLE_ONLY " == *" $(basename "$f") "* ]] && bins+=("$f")
done
ctest --test-dir "$BUILD" -N -L gpu --show-only=json-v1 > "$DEST/ctest-gpu.json"
python3 - "$DEST/ctest-gpu.json" "$ROOT" "$BUILD" > "$DEST/tests.tsv" <<'PY'
import json, os, sys
data = json.load(open(sys.argv[1]))
root, build = sys.argv[2], os.path.abspath(sys.argv[3])
for t in data.get("tests", []):
    cmd = t.get("command") or []
    if not cmd:
        continue
    def rel(a):  # paths into the source tree become relative to the repo root on the device
        if a.startswith(build + "/"):
            return ".gpu_bundle/build/" + a[len(build) + 1:]
        if a.startswith(root + "/"):
            return a[len(root) + 1:]
        return a
    args = [rel(a) for a in cmd[1:]]
    if any("\t" in a or "\n" in a for a in args):
        sys.exit(f"test {t['name']}: tabs/newlines in arguments are not supported")
    print(f"{t['name']}\t{cmd[0]}\t{' '.join(args)}")
PY
rm -f "$DEST/ctest-gpu.json"
if [[ -n "${PETAL_BUNDLE_ONLY:-}" ]]; then  # a slim bundle ships only the tests it names
  awk -F'\t' -v only=" $PETAL_BUNDLE_ONLY " '{ n = split($2, p, "/"); if (index(only, " " p[n] " ")) print }' \
    "$DEST/tests.tsv" > "$DEST/tests.tsv.only"
  mv "$DEST/tests.tsv.only" "$DEST/tests.tsv"
fi
while IFS=$'\t' read -r _name exe _args; do
  bins+=("$exe")
done < "$DEST/tests.tsv"

for b in "${bins[@]}"; do
  cp -f "$b" "$STAGE/bin/"
  strip --strip-debug "$STAGE/bin/$(basename "$b")" 2>/dev/null || true
done
# tests.tsv names binaries by their bundle path.
awk -F'\t' -v OFS='\t' '{ n = split($2, p, "/"); $2 = ".gpu_bundle/bin/" p[n]; print }' "$DEST/tests.tsv" > "$DEST/tests.tsv.new"
mv "$DEST/tests.tsv.new" "$DEST/tests.tsv"
log "binaries: $(ls "$STAGE/bin" | tr '\n' ' ')"
log "gpu tests: $(cut -f1 "$DEST/tests.tsv" | tr '\n' ' ' | sed "s/ $//")"
[[ -s "$DEST/tests.tsv" ]] || log "(no test is labelled gpu yet)"

# 2. Shared libraries. Not shipped: glibc and the loader, libstdc++/libgcc (newer on the GPU machine),
#    and CUDA's own libraries (the GPU machine has them; cuBLAS alone is ~500 MB).
skip_re='^(linux-vdso|ld-linux|libc\.so|libm\.so|libmvec|libpthread|libdl\.so|librt\.so|libutil|libresolv|libanl|libnss_|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libcudnn|libnvrtc|libnccl|libcufft|libcurand|libcusolver|libcusparse|libnvJitLink|libnvToolsExt|libnvidia|libcupti|libnvjpeg|libnpp)'
declare -A seen=()
missing=0
for b in "$STAGE"/bin/*; do
  while read -r line; do
    name="$(awk '{print $1}' <<<"$line")"
    if [[ "$line" == *"not found"* ]]; then
      echo "[bundle] $(basename "$b"): $name not found" >&2; missing=1; continue
    fi
    [[ "$line" == *"=>"* ]] || continue
    path="$(awk '{print $3}' <<<"$line")"
    [[ -n "$path" && -e "$path" ]] || continue
    if [[ "$name" =~ $skip_re ]]; then continue; fi
    [[ -n "${seen[$name]:-}" ]] && continue
    seen[$name]="$path"
    cp -L "$path" "$STAGE/lib/$name"
  done < <(ldd "$b")
done
((missing == 0)) || die "unresolved libraries (see above)"
log "libraries (${#seen[@]}): $(ls "$STAGE/lib" | tr '\n' ' ')"

# 3. Archive (xz: the GPU machine unpacks it with tar or, failing that, Python's tarfile).
log "compressing (xz -6)"
tar -C "$STAGE" -cf - bin lib | xz -6 -T "$JOBS" > "$DEST/bundle.tar.xz"

# 4. Manifest.
python3 - "$DEST" "$ARCH" "$BUILD" "$STAGE" <<'PY'
import hashlib, json, os, subprocess, sys, time
dest, arch, build, stage = sys.argv[1:5]
def git(*a):
    r = subprocess.run(["git", *a], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None
files = []
for sub in ("bin", "lib"):
    for n in sorted(os.listdir(os.path.join(stage, sub))):
        p = os.path.join(stage, sub, n)
        files.append({"path": f"{sub}/{n}", "bytes": os.path.getsize(p),
                      "sha256": hashlib.sha256(open(p, "rb").read()).hexdigest()})
tests = []
for line in open(os.path.join(dest, "tests.tsv")):
    name, exe, args = (line.rstrip("\n").split("\t") + [""])[:3]
    tests.append({"name": name, "bin": exe, "args": args})
nvcc = subprocess.run(["bash", "-c", "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc) --version | tail -1"],
                      capture_output=True, text=True).stdout.strip()
m = {"created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
     "git_commit": git("rev-parse", "HEAD"), "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
     "cuda_architectures": arch, "build_dir": build, "nvcc": nvcc,
     "ld_library_path": ".gpu_bundle/lib:/usr/local/cuda/lib64",
     "archive": "bundle.tar.xz",
     "archive_sha256": hashlib.sha256(open(os.path.join(dest, "bundle.tar.xz"), "rb").read()).hexdigest(),
     "archive_bytes": os.path.getsize(os.path.join(dest, "bundle.tar.xz")),
     "tests": tests, "files": files, "unpacked_bytes": sum(f["bytes"] for f in files)}
json.dump(m, open(os.path.join(dest, "MANIFEST.json"), "w"), indent=1)
PY
total_kib="$(du -sk "$DEST" | cut -f1)"
log "wrote $DEST: $((total_kib / 1024)) MiB packed ($(du -sk "$STAGE" | cut -f1) KiB unpacked, staged in $STAGE)"
if ((total_kib > BUDGET_MIB * 1024)); then
  log "WARNING: bundle is over ${BUDGET_MIB} MiB; with the work tree it may not fit the 64 MiB carry limit"
fi
