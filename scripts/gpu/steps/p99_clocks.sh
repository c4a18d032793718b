#!/usr/bin/env bash
# GPU step (issue 32, session 25): what spreads batch-1 latency where p99 > 1.1 x p50 (4b 1 x 512,
# 0.6b 1 x 4096 in session 24). `petal bench engine` runs each scenario for P99_SECONDS (4) while
# nvidia-smi samples SM clock, power and throttle reasons every 50 ms; the step prints the clock
# and power spread next to the latency percentiles. P99_CASES overrides the "shape:scenario" list.
# Results: $OUT/p99_clocks/<shape>-<scenario>.json and .smi.csv.
set -uo pipefail
D="$OUT/p99_clocks"
mkdir -p "$D"
BIN=.gpu_bundle/bin/petal
rc=0
for c in ${P99_CASES:-0.6b:latency_1x4096 4b:latency_1x512 0.6b:latency_1x128}; do
  shape=${c%%:*} sc=${c#*:}
  M=/tmp/petal-models/$shape-bidirectional
  [[ -f $M/model.safetensors ]] ||
    $BIN make-model --shape pplx-embed-v1-$shape --attention bidirectional --out $M >/dev/null
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv,noheader,nounits -lms 50 > "$D/$shape-$sc.smi.csv" 2>/dev/null &
  smi=$!
  $BIN bench engine --model $M --backend cuda --max-batch-tokens 32768 --max-batch-seqs 128 \
    --seconds "${P99_SECONDS:-4}" --scenarios $sc --out "$D/$shape-$sc.json" | grep -E 'latency' || rc=1
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  python3 - "$D/$shape-$sc.smi.csv" <<'PY'
import sys, collections
rows = [r.split(", ") for r in open(sys.argv[1]) if r.count(",") >= 5]
if not rows: print("  no nvidia-smi samples"); sys.exit(0)
sm = sorted(int(float(r[1])) for r in rows); pw = sorted(float(r[3]) for r in rows)
q = lambda v, p: v[min(len(v) - 1, int(p * len(v)))]
thr = collections.Counter(r[5].strip() for r in rows)
print("  %d samples: SM clock min/p10/p50/max %d/%d/%d/%d MHz, power p50/max %.0f/%.0f W, throttle %s" %
      (len(rows), sm[0], q(sm, .1), q(sm, .5), sm[-1], q(pw, .5), pw[-1], dict(thr.most_common(4))))
PY
done
exit $rc
