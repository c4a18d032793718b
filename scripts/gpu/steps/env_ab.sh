#!/usr/bin/env bash
# GPU step (issue 32): an A/B of one environment switch in one binary, e.g. the CUTLASS GEMM
# candidates (PETAL_GEMM_CUTLASS=0/1) or the L2 prefetcher (PETAL_L2_PREFETCH=0/1/2):
# `petal bench engine` on random-weight shapes for each value, alternating over AB_ROUNDS rounds
# so drift shows. Every run does the warm-up check against the CPU reference. Results JSON (and
# the tuner's plan table, *.json.kernels.txt) in $OUT/env_ab/<var>/<shape>-v<value>-r<round>.json,
# a table in $OUT/env_ab/<var>/summary.md.
# Env: AB_VAR (default PETAL_GEMM_CUTLASS), AB_VALUES (default "0 1"), AB_SHAPES (default
# "0.6b 4b"), AB_ROUNDS (default 2), AB_EXTRA_ENV (e.g. "PETAL_L2_PREFETCH=1", applied to all),
# AB_ENGINE_ARGS (extra `petal bench engine` flags, e.g. "--quantize fp8 --no-fp8-gate"),
# AB_SCENARIOS (replaces the per-shape scenario list), AB_TAG (suffix of the results folder).
set -euo pipefail
VAR="${AB_VAR:-PETAL_GEMM_CUTLASS}"
D="$OUT/env_ab/$VAR${AB_TAG:+-$AB_TAG}"
mkdir -p "$D"
SECS="${PETAL_BENCH_SECONDS:-2}"
for shape in ${AB_SHAPES:-0.6b 4b}; do
  M=/tmp/petal-models/$shape-bidirectional
  [[ -f $M/model.safetensors ]] ||
    petal make-model --shape pplx-embed-v1-$shape --attention bidirectional --out $M >/dev/null
  sc=latency_1x128,latency_1x512,latency_1x4096,latency_5x512,throughput_100x512
  [[ $shape == 4b ]] && sc=latency_1x128,latency_1x512,throughput_100x512
  [[ -n "${AB_SCENARIOS:-}" ]] && sc=$AB_SCENARIOS
  for r in $(seq 1 "${AB_ROUNDS:-2}"); do
    for v in ${AB_VALUES:-0 1}; do
      echo "== $shape $VAR=$v round $r"
      env ${AB_EXTRA_ENV:-} "$VAR=$v" petal bench engine --model $M --backend cuda \
        --max-batch-tokens 32768 --max-batch-seqs 128 --seconds "$SECS" --scenarios $sc ${AB_ENGINE_ARGS:-} \
        --out "$D/$shape-v$v-r$r.json" | grep -E 'latency|throughput|check' || true
    done
  done
done
python3 - "$D" "$VAR" <<'PY'
import glob, json, os, re, sys
d, var = sys.argv[1], sys.argv[2]
rows, values = {}, []
for f in sorted(glob.glob(os.path.join(d, "*-v*-r*.json"))):
    shape, v, r = re.match(r"(.+)-v([^-]+)-r(\d+)\.json$", os.path.basename(f)).groups()
    values.append(v) if v not in values else None
    j = json.load(open(f))
    rows.setdefault((shape, "check_worst_cosine"), {}).setdefault(v, []).append(j.get("check_worst_cosine"))
    for name, s in j.get("scenarios", {}).items():
        x = s.get("p50_ms") if s.get("p50_ms") is not None else s.get("emb_per_s")
        rows.setdefault((shape, name), {}).setdefault(v, []).append(x)
        if s.get("p99_ms") is not None:
            rows.setdefault((shape, name + " p99"), {}).setdefault(v, []).append(s.get("p99_ms"))
fmt = lambda name, x: (f"{x:.6f}" if name == "check_worst_cosine" else f"{x:.3f}") if isinstance(x, float) else str(x)
out = [f"| shape | scenario | " + " | ".join(f"{var}={v}" for v in values) + " |",
       "|---|---|" + "---|" * len(values)]
for (shape, name), by in sorted(rows.items()):
    out.append(f"| {shape} | {name} | " + " | ".join("/".join(fmt(name, x) for x in by.get(v, [])) for v in values) + " |")
open(os.path.join(d, "summary.md"), "w").write(
    "p50 ms (latency; p99 rows too) or emb/s (throughput), one value per round\n\n" + "\n".join(out) + "\n")
print("\n".join(out))
PY
