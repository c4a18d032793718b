#!/usr/bin/env bash
# Runs ON the GPU machine, from the root of the repository copy there, with:
#   .gpu_bundle/   made by scripts/gpu/bundle.sh on the build machine (carried: ".gpu_bundle")
#   .gpu_carry/    optional model parts made by scripts/gpu/pack_models.py (carried one part per call)
#   $OUT           folder whose contents come back (default: .gpu_out)
#
# usage: bash scripts/gpu/run_on_device.sh [STEP ...]        (no STEP = "tests")
# Built-in steps (each logs to $OUT/logs/<step>.log and prints one status line):
#   info     GPU, driver, bundle manifest, missing-library check   (always runs first)
#   tests    every test binary labelled gpu (.gpu_bundle/tests.tsv); JUnit XML in $OUT/gtest/
#   unpack   assemble carried model parts (.gpu_carry/part-*) into .gpu_models/<name>/
#   golden   unpack, then sentence-transformers golden embeddings for every .gpu_models/<name>
#            into $OUT/golden/ (scripts/gpu/golden_st.py; PETAL_GOLDEN_DEVICE=cpu|cuda, default cpu)
# Any other STEP runs scripts/gpu/steps/STEP.sh (see scripts/gpu/steps/README.md): later work adds
# steps there (bench, baselines, profiles, ...) without editing this file.
# Exit status: 0 when every step passed. A final line "N passed, M failed" counts the steps.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
export OUT="${OUT:-$ROOT/.gpu_out}"
mkdir -p "$OUT/logs"
export PETAL_SOURCE_DIR="$ROOT"
export PETAL_BUNDLE="$ROOT/.gpu_bundle"
export LD_LIBRARY_PATH="$PETAL_BUNDLE/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PETAL_BUNDLE/bin:$PATH"

say() { printf '[gpu %s] %s\n' "$(date +%H:%M:%S)" "$*" | tee -a "$OUT/summary.txt"; }

# Unpack .gpu_bundle/bundle.tar.xz into .gpu_bundle/{bin,lib} (once per archive).
unpack_bundle() {
  local arc="$PETAL_BUNDLE/bundle.tar.xz" stamp="$PETAL_BUNDLE/.unpacked"
  [[ -f "$arc" ]] || { echo "no $arc: run scripts/gpu/bundle.sh on the build machine and carry .gpu_bundle"; return 1; }
  local sum; sum="$(sha256sum "$arc" | cut -d' ' -f1)"
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$sum" && -d "$PETAL_BUNDLE/bin" ]]; then return 0; fi
  rm -rf "${PETAL_BUNDLE:?}/bin" "${PETAL_BUNDLE:?}/lib"
  if ! tar -C "$PETAL_BUNDLE" -xJf "$arc" 2>/dev/null; then
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$arc" "$PETAL_BUNDLE"
  fi
  echo "$sum" > "$stamp"
}

step_info() {
  unpack_bundle
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader || true
  else
    echo "nvidia-smi not found (no GPU here?)"
  fi
  [[ -f "$PETAL_BUNDLE/MANIFEST.json" ]] && python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
print("bundle: commit %s%s, arch %s, %d tests, %d files, %s" % (m.get("git_commit", "?")[:10],
      " (dirty)" if m.get("git_dirty") else "", m.get("cuda_architectures"), len(m.get("tests", [])),
      len(m.get("files", [])), m.get("nvcc", "")))' "$PETAL_BUNDLE/MANIFEST.json"
  local bad=0 b
  for b in "$PETAL_BUNDLE"/bin/*; do
    [[ -f "$b" ]] || continue
    if ldd "$b" | grep -q 'not found'; then
      echo "$(basename "$b"): missing libraries:"; ldd "$b" | grep 'not found'; bad=1
    fi
  done
  return $bad
}

step_tests() {
  unpack_bundle
  local list="$PETAL_BUNDLE/tests.tsv" pass=0 fail=0 name exe args rc t0
  [[ -f "$list" ]] || { echo "no $list"; return 1; }
  mkdir -p "$OUT/gtest"
  while IFS=$'\t' read -r name exe args; do
    [[ -n "$name" ]] || continue
    local extra=()
    grep -q -- '--gtest_output' "$exe" 2>/dev/null && extra=(--gtest_output="xml:$OUT/gtest/$name.xml")
    t0=$SECONDS
    set +e
    # shellcheck disable=SC2086  # args are whitespace-separated by construction (bundle.sh)
    timeout "${PETAL_TEST_TIMEOUT:-900}" "$exe" $args "${extra[@]}" > "$OUT/logs/test_$name.log" 2>&1 < /dev/null
    rc=$?
    set -e
    if ((rc == 0)); then
      pass=$((pass + 1))
      echo "PASS $name ($((SECONDS - t0))s) $(grep -E '^\[  PASSED  \]' "$OUT/logs/test_$name.log" | tail -1 || true)"
    else
      fail=$((fail + 1))
      echo "FAIL $name (exit $rc, $((SECONDS - t0))s); last lines:"
      grep -E '^\[  FAILED  \]|Failure|error' "$OUT/logs/test_$name.log" | head -20 || true
      tail -5 "$OUT/logs/test_$name.log" || true
    fi
  done < "$list"
  echo "gpu tests: $pass passed, $fail failed"
  ((fail == 0))
}

step_unpack() {
  python3 scripts/gpu/pack_models.py unpack --carry .gpu_carry --dest .gpu_models
}

step_golden() {
  step_unpack
  local rc
  set +e
  python3 scripts/gpu/golden_st.py --models-dir .gpu_models --out "$OUT/golden" \
    --device "${PETAL_GOLDEN_DEVICE:-cpu}" 2>&1 | grep -v -E 'Loading weights|deprecated'
  rc=${PIPESTATUS[0]}
  set -e
  return "$rc"
}

run_step() {
  local step="$1" fn="step_$1" plugin="scripts/gpu/steps/$1.sh" rc t0=$SECONDS
  set +e
  if declare -F "$fn" >/dev/null; then
    ( set -e; "$fn" ) > "$OUT/logs/$step.log" 2>&1
    rc=$?
  elif [[ -f "$plugin" ]]; then
    bash "$plugin" > "$OUT/logs/$step.log" 2>&1
    rc=$?
  else
    echo "unknown step '$step' (built-in: info tests unpack golden; plugins: $(find scripts/gpu/steps -name "*.sh" -printf "%f " 2>/dev/null | sed "s/\.sh / /g"))" > "$OUT/logs/$step.log"
    rc=2
  fi
  set -e
  if ((rc == 0)); then
    say "step $step: OK ($((SECONDS - t0))s)"
    tail -n "${PETAL_GPU_TAIL:-15}" "$OUT/logs/$step.log" | sed 's/^/    /'
  else
    say "step $step: FAILED (exit $rc, $((SECONDS - t0))s); log: \$OUT/logs/$step.log"
    tail -n 40 "$OUT/logs/$step.log" | sed 's/^/    /'
  fi
  return $rc
}

steps=("$@")
((${#steps[@]})) || steps=(tests)
: > "$OUT/summary.txt"
passed=0 failed=0
for s in info "${steps[@]}"; do
  [[ "$s" == info && $passed$failed != 00 ]] && continue
  if run_step "$s"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
say "$passed passed, $failed failed"
# The run tool brings back at most 8 files: pack everything but the summary into one archive.
if [[ -z "${PETAL_GPU_NO_PACK:-}" ]]; then
  tar -C "$OUT" -czf /tmp/petal-results.tgz --exclude=summary.txt . && \
    find "$OUT" -mindepth 1 -not -name summary.txt -delete && mv /tmp/petal-results.tgz "$OUT/results.tgz"
fi
((failed == 0))
