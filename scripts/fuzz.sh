#!/usr/bin/env bash
# Builds the libFuzzer targets (CMake preset `fuzz`: clang, ASan + UBSan) and runs each one for a
# bounded time over its committed seed corpus (tests/fuzz/corpus/<target>/). New inputs go to
# build/fuzz/work/<target>/ (kept between runs, never committed automatically); a crash leaves
# its input in build/fuzz/artifacts/<target>/ and fails the script. A summary line per target
# (executions, new corpus entries, crashes) goes to stdout and build/fuzz/summary.txt.
#   bash scripts/fuzz.sh                    # every target, PETAL_FUZZ_SECONDS each (default 30)
#   bash scripts/fuzz.sh tokenizer_bpe      # one target
#   PETAL_FUZZ_SECONDS=3600 bash scripts/fuzz.sh safetensors   # a long run (docs/reliability.md)
# Environment: PETAL_FUZZ_SECONDS (per target), PETAL_FUZZ_PARALLEL (targets at once, default 2),
# PETAL_FUZZ_NO_BUILD=1 (use the existing build/fuzz).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
seconds="${PETAL_FUZZ_SECONDS:-30}"
parallel="${PETAL_FUZZ_PARALLEL:-2}"
log() { printf '[fuzz %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

if [[ "${PETAL_FUZZ_NO_BUILD:-0}" != 1 ]]; then
  log "build preset 'fuzz'"
  cmake --preset fuzz >/dev/null
  nice cmake --build --preset fuzz -j "${JOBS:-2}"
fi

targets=("$@")
if ((${#targets[@]} == 0)); then
  for d in tests/fuzz/corpus/*/; do targets+=("$(basename "$d")"); done
fi

out="build/fuzz"
mkdir -p "$out/logs"
: >"$out/summary.txt"

run_one() {
  local t="$1"
  local bin="$out/bin/fuzz_$t" work="$out/work/$t" art="$out/artifacts/$t"
  [[ -x "$bin" ]] || { echo "$t: missing $bin" >&2; return 1; }
  mkdir -p "$work" "$art"
  local dict=()
  case "$t" in openai_embed | tei_embed | score | rerank | classify | tokenize_body | model_config | safetensors)
    dict=(-dict=tests/fuzz/json.dict) ;;
  esac
  local before rc=0
  before="$(find "$work" -type f | wc -l)"
  # -timeout: one input taking this long is a finding (a hang); -rss_limit_mb bounds memory.
  nice "$bin" "$work" "tests/fuzz/corpus/$t" "${dict[@]}" -max_total_time="$seconds" \
    -timeout=25 -rss_limit_mb=3072 -print_final_stats=1 -artifact_prefix="$art/" \
    >"$out/logs/$t.log" 2>&1 || rc=$?
  local execs crashes added
  # A target that died before printing its final stats has no count (reported as "?").
  execs="$(grep -o 'stat::number_of_executed_units: [0-9]*' "$out/logs/$t.log" | awk '{print $2}' | tail -1 || true)"
  crashes="$(find "$art" -type f | wc -l)"
  added="$(($(find "$work" -type f | wc -l) - before))"
  printf '%-20s %10s execs in %ss, %4s new corpus entries, %s crash artifacts, exit %s\n' \
    "$t" "${execs:-?}" "$seconds" "$added" "$crashes" "$rc" | tee -a "$out/summary.txt"
  if ((rc != 0)); then
    grep -E 'ERROR|runtime error|invariant failed|SUMMARY' "$out/logs/$t.log" | head -5 >&2 || true
  fi
  return "$rc"
}

log "running ${#targets[@]} targets for ${seconds}s each, $parallel at a time"
failed=0
pids=()
names=()
for t in "${targets[@]}"; do
  run_one "$t" &
  pids+=($!)
  names+=("$t")
  if ((${#pids[@]} >= parallel)); then
    wait "${pids[0]}" || { failed=1; log "FAILED: ${names[0]} (log: $out/logs/${names[0]}.log)"; }
    pids=("${pids[@]:1}")
    names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { failed=1; log "FAILED: ${names[$i]} (log: $out/logs/${names[$i]}.log)"; }
done
((failed == 0)) && log "no crashes" || log "crashes found: see build/fuzz/artifacts/"
exit "$failed"
