#!/usr/bin/env bash
# GPU step (issue 32): the L2 weight prefetcher (kernels/cuda/l2_prefetch.h) A/B in one binary:
# `petal bench engine` on the 0.6b and 4b random-weight shapes with PETAL_L2_PREFETCH=0 (off: the
# previous forward pass, unchanged), 1 and 2 GEMMs ahead, alternating over PREFETCH_ROUNDS rounds
# (default 2) so drift shows. Every run does the warm-up check against the CPU reference. Results
# JSON in $OUT/prefetch_ab/<shape>-pf<N>-r<R>.json and a table in $OUT/prefetch_ab/summary.md.
# ~4 min. Env: PREFETCH_SHAPES (default "0.6b 4b"), PREFETCH_VALUES (default "0 1 2").
set -euo pipefail
D="$OUT/prefetch_ab"
mkdir -p "$D"
SECS="${PETAL_BENCH_SECONDS:-2}"
for shape in ${PREFETCH_SHAPES:-0.6b 4b}; do
  M=/tmp/petal-models/$shape-bidirectional
  [[ -f $M/model.safetensors ]] ||
    petal make-model --shape pplx-embed-v1-$shape --attention bidirectional --out $M >/dev/null
  sc=latency_1x128,latency_1x512,latency_1x32,latency_8x128,latency_5x512,throughput_100x512
  [[ $shape == 4b ]] && sc=latency_1x128,latency_1x512,latency_5x512
  for r in $(seq 1 "${PREFETCH_ROUNDS:-2}"); do
    for pf in ${PREFETCH_VALUES:-0 1 2}; do
      echo "== $shape pf=$pf round $r"
      PETAL_L2_PREFETCH=$pf petal bench engine --model $M --backend cuda --max-batch-tokens 32768 \
        --max-batch-seqs 128 --seconds "$SECS" --scenarios $sc --out "$D/$shape-pf$pf-r$r.json" |
        grep -E 'latency|throughput|check' || true
    done
  done
done
python3 - "$D" <<'PY'
import glob, json, os, re, sys
d = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(d, "*-pf*-r*.json"))):
    shape, pf, r = re.match(r"(.+)-pf(\d)-r(\d)\.json", os.path.basename(f)).groups()
    j = json.load(open(f))
    rows.setdefault((shape, "check_worst_cosine"), {}).setdefault(pf, []).append(j.get("check_worst_cosine"))
    for name, s in j.get("scenarios", {}).items():
        v = s.get("p50_ms") if s.get("p50_ms") is not None else s.get("emb_per_s")
        rows.setdefault((shape, name), {}).setdefault(pf, []).append(v)
out = ["| shape | scenario | " + " | ".join(f"pf={p}" for p in "012") + " |", "|---|---|---|---|---|"]
for (shape, name), by in sorted(rows.items()):
    out.append(f"| {shape} | {name} | " + " | ".join(
        "/".join(f"{x:.6f}" if name == "check_worst_cosine" else f"{x:.3f}" if isinstance(x, float) else str(x) for x in by.get(p, [])) for p in "012") + " |")
open(os.path.join(d, "summary.md"), "w").write("p50 ms (latency) or emb/s (throughput), one value per round\n\n" + "\n".join(out) + "\n")
print("\n".join(out))
PY
