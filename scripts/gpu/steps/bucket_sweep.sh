#!/usr/bin/env bash
# GPU step: the CUDA-graph token bucket choice (issue #6 asks to measure it): `petal bench engine`
# on the pplx-embed-v1-0.6b shape for a few (--token-bucket, --token-bucket-large) pairs, on the
# scenarios where padding matters (batch-1 at 128 and 4096 tokens, 5 x 512, 100 x 512).
# Results: $OUT/bench/bucket-<small>-<large>.json and a summary table in the log.
set -euo pipefail
mkdir -p "$OUT/bench"
M=/tmp/petal-models/0.6b-bidirectional
[[ -f $M/model.safetensors ]] || petal make-model --shape pplx-embed-v1-0.6b --attention bidirectional --out $M
SC=latency_1x128,latency_1x4096,latency_5x512,throughput_100x512
for pair in ${PETAL_BUCKET_PAIRS:-16:256 64:256 128:256 64:1024}; do
  small=${pair%:*}; large=${pair#*:}
  petal bench engine --model $M --backend cuda --max-batch-tokens 32768 --max-batch-seqs 128 --no-check \
    --seconds "${PETAL_BENCH_SECONDS:-1}" --scenarios $SC --token-bucket $small --token-bucket-large $large \
    --out "$OUT/bench/bucket-$small-$large.json" > "$OUT/bench/bucket-$small-$large.log" 2>&1 || echo "failed: $pair"
done
python3 - "$OUT/bench" <<'PY'
import glob, json, os, sys
rows = []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "bucket-*.json"))):
    d = json.load(open(f)); s = d.get("scenarios", d)
    name = os.path.basename(f)[7:-5]
    get = lambda k, m: (s.get(k) or {}).get(m, float("nan"))
    rows.append((name, get("latency_1x128", "p50_ms"), get("latency_1x4096", "p50_ms"),
                 get("latency_5x512", "p50_ms"), get("throughput_100x512", "emb_per_s"),
                 (d.get("engine_stats") or {}).get("graph_captures", float("nan"))))
print("| buckets small-large | 1x128 p50 ms | 1x4096 p50 ms | 5x512 p50 ms | 100x512 emb/s | graphs |")
print("|---|---|---|---|---|---|")
for r in rows: print("| %s | %.3f | %.2f | %.2f | %.0f | %g |" % r)
PY
