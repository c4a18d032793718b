#!/usr/bin/env bash
# GPU step: online latency (issue 20), in one run.
#  1. engine p50/p99 on the 0.6b shape (bidirectional) with programmatic dependent launch on and
#     off (PETAL_PDL=1 / 0), alternating twice, same binary: 1 x 128, 1 x 512, 1 x 4096, 100 x 512;
#  2. start-up: `petal server` start to its first answer (warm page cache: the model is read once
#     before), 0.6b, and 4b unless PETAL_LATENCY_SKIP_4B is set;
#  3. Nsight Compute per-kernel table of one eager 1 x 128 forward (and of one fp8 100 x 512
#     batch, issue 19), with the weight-reading floor beside it.
# Results: $OUT/latency/*.json, *.csv; summary on stdout.
set -uo pipefail
D="$OUT/latency"
mkdir -p "$D"
M=/tmp/petal-models
mkdir -p $M
mk() { [[ -f $M/$1/model.safetensors ]] || petal make-model --shape pplx-embed-v1-$2 --attention bidirectional --out $M/$1 >/dev/null; }
mk 0.6b-bidirectional 0.6b
rc=0
SECS="${PETAL_BENCH_SECONDS:-2}"
B="--backend cuda --max-batch-tokens 32768 --max-batch-seqs 128 --seconds $SECS"
SC=latency_1x128,latency_1x512,latency_1x4096,throughput_100x512
for round in 1 2; do
  for pdl in 1 0; do
    echo "== engine round $round PETAL_PDL=$pdl"
    PETAL_PDL=$pdl timeout 200 petal bench engine --model $M/0.6b-bidirectional $B --scenarios $SC \
      --out "$D/engine-pdl$pdl-r$round.json" > "$D/engine-pdl$pdl-r$round.log" 2>&1 || { echo "bench failed"; tail -5 "$D/engine-pdl$pdl-r$round.log"; rc=1; }
  done
done
# The same scenarios with a build of an earlier commit, when carried (.gpu_probe/base/petal).
if [[ -x .gpu_probe/base/petal ]]; then
  echo "== engine base ($(.gpu_probe/base/petal version 2>/dev/null | head -1))"
  timeout 200 .gpu_probe/base/petal bench engine --model $M/0.6b-bidirectional $B --scenarios $SC \
    --out "$D/engine-base.json" > "$D/engine-base.log" 2>&1 || echo "base bench failed"
fi
python3 - "$D" <<'PY'
import glob, json, sys, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "engine-pdl*.json"))):
    d = json.load(open(f))
    rows = []
    for name, s in d.get("scenarios", {}).items():
        if "emb_per_s" in s and "throughput" in name: rows.append("%s %.1f emb/s" % (name, s["emb_per_s"]))
        elif "p50_ms" in s: rows.append("%s p50 %.3f p99 %.3f" % (name, s["p50_ms"], s.get("p99_ms", 0)))
    print(os.path.basename(f), "|", "; ".join(rows))
PY

startup() {  # name model
  local name=$1 model=$2 port=$((50600 + RANDOM % 300))
  cat $model/*.safetensors > /dev/null  # warm page cache
  local t0; t0=$(date +%s.%N)
  petal server --model $model --backend cuda --listen 127.0.0.1:$port > "$D/startup-$name.log" 2>&1 &
  local pid=$!
  local ok=0
  for _ in $(seq 1 1200); do
    if petal client --server 127.0.0.1:$port embed --ids '[[11,12,13,14,15,16,17,18]]' > /dev/null 2>&1; then ok=1; break; fi
    sleep 0.01
  done
  local t1; t1=$(date +%s.%N)
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
  python3 -c "import json,sys; json.dump({'model': sys.argv[1], 'first_answer_s': float(sys.argv[3]) - float(sys.argv[2]), 'ok': sys.argv[4] == '1'}, open(sys.argv[5], 'w'))" \
    "$name" "$t0" "$t1" "$ok" "$D/startup-$name.json"
  echo "startup $name: $(python3 -c "print(round($t1 - $t0, 3))") s to first answer (ok=$ok)"
  grep -iE "ready|listening|loaded|took" "$D/startup-$name.log" | head -5
}
startup 0.6b $M/0.6b-bidirectional
if [[ -z "${PETAL_LATENCY_SKIP_4B:-}" ]]; then
  mk 4b-bidirectional 4b
  startup 4b $M/4b-bidirectional
fi

# In-graph per-kernel times (no serialisation, no cache flush) with Nsight Systems, if present:
# 1 x 128 for 2 s, kernels summed by name; divide by the forward count in the bench JSON.
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys 2>/dev/null || true)
if [[ -n "$NSYS" && -z "${PETAL_LATENCY_SKIP_NCU:-}" ]]; then
  for v in 1 0; do
    PETAL_PDL=$v timeout 150 "$NSYS" profile --cuda-graph-trace=node -o "$D/nsys-1x128-pdl$v" --force-overwrite true \
      petal bench engine --model $M/0.6b-bidirectional --backend cuda --no-check --max-batch-tokens 32768 \
      --max-batch-seqs 128 --seconds 2 --scenarios latency_1x128 --out "$D/nsys-1x128-pdl$v.json" > "$D/nsys-pdl$v.log" 2>&1 || echo "nsys failed"
    timeout 100 "$NSYS" stats --report cuda_gpu_kern_sum --format csv -o "$D/nsys-1x128-pdl$v" "$D/nsys-1x128-pdl$v.nsys-rep" > /dev/null 2>&1 || true
    rm -f "$D"/nsys-1x128-pdl$v.nsys-rep "$D"/nsys-1x128-pdl$v.sqlite
    head -20 "$D"/nsys-1x128-pdl${v}_cuda_gpu_kern_sum.csv 2>/dev/null | cut -c1-200
  done
fi

NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
if [[ -n "$NCU" && -z "${PETAL_LATENCY_SKIP_NCU:-}" ]]; then
  prof() {  # name scenario attention extra...
    local name=$1 sc=$2 att=$3 bin=${PETAL_NCU_BIN:-$(command -v petal)}; shift 3
    timeout 170 "$NCU" --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv \
      "$bin" bench engine --model $M/0.6b-bidirectional --backend cuda --no-graphs --no-check \
      --attention $att --max-batch-tokens 32768 --max-batch-seqs 64 --seconds 0.1 --max-iters 2 \
      --scenarios $sc "$@" > "$D/ncu-$name.csv" 2> "$D/ncu-$name.err" || echo "ncu failed: $name"
    python3 bench/ncu_table.py "$D/ncu-$name.csv" --markdown > "$D/ncu-$name.md" || true
    cat "$D/ncu-$name.md"
  }
  prof 1x128 latency_1x128 flash
  [[ -x .gpu_probe/base/petal ]] && PETAL_NCU_BIN=$PWD/.gpu_probe/base/petal prof base-1x128 latency_1x128 flash
  prof fp8-100x512 throughput_100x512 cudnn --quantize fp8 --no-fp8-gate
fi
exit $rc
