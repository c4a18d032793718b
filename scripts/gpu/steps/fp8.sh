#!/usr/bin/env bash
# GPU step: --quantize fp8 (issue 19) beside bf16, in one run.
#  1. fidelity: worst cosine vs HF fp32 over lengths 1..8191 for Petal bf16, Petal fp8 (every batch
#     in fp8: --fp8-min-tokens 0) and HF bf16; 0.6b both masks, 4b bidirectional
#     (scripts/gpu/compare_hf.py --variant);
#  2. engine: `petal bench engine` on the 0.6b shape, bf16 and fp8 (default threshold, and fp8 on
#     every batch for the small scenarios), 4b at 100 x 512 / 1 x 128 (and causal 0.6b 100 x 512);
#  3. a before/after baseline: when .gpu_probe/base/petal exists (a build of an earlier commit),
#     the same bf16 scenarios with it, in the same run.
# Results: $OUT/fp8/*.json; a summary table on stdout (bench/fp8_report.py).
set -uo pipefail
mkdir -p "$OUT/fp8"
M=/tmp/petal-models
mkdir -p $M
mk() { [[ -f $M/$1/model.safetensors ]] || petal make-model --shape pplx-embed-v1-$2 --attention $3 --out $M/$1; }
mk 0.6b-bidirectional 0.6b bidirectional
mk 0.6b-causal 0.6b causal
mk 4b-bidirectional 4b bidirectional
rc=0
SECS="${PETAL_BENCH_SECONDS:-3}"
B="--backend cuda --max-batch-tokens 32768 --max-batch-seqs 128 --seconds $SECS"
FP8="--quantize fp8 --no-fp8-gate"
bench() {  # name model args...
  local name=$1 model=$2; shift 2
  echo "== bench $name"
  timeout 200 petal bench engine --model $M/$model $B "$@" --out "$OUT/fp8/engine-$name.json" \
    > "$OUT/fp8/engine-$name.log" 2>&1 || { echo "bench $name failed"; tail -5 "$OUT/fp8/engine-$name.log"; rc=1; }
  grep -E "fp8 fidelity|warm-up check" "$OUT/fp8/engine-$name.log" || true
}
if [[ -z "${PETAL_FP8_SKIP_BENCH:-}" ]]; then
  [[ -n "${PETAL_FP8_SKIP_BF16:-}" ]] || bench 0.6b-bf16 0.6b-bidirectional
  bench 0.6b-fp8 0.6b-bidirectional $FP8
  bench 0.6b-fp8mlp 0.6b-bidirectional $FP8 --fp8-layers mlp \
    --scenarios throughput_100x512,throughput_100x1024,throughput_100x4096
  bench 0.6b-fp8-all 0.6b-bidirectional $FP8 --fp8-min-tokens 0 \
    --scenarios latency_1x128,latency_1x512,latency_5x512,latency_1x4096
  if [[ -x .gpu_probe/base/petal && -z "${PETAL_FP8_SKIP_BF16:-}" ]]; then
    echo "== bench 0.6b-base ($(.gpu_probe/base/petal version 2>/dev/null | head -1))"
    timeout 200 .gpu_probe/base/petal bench engine --model $M/0.6b-bidirectional $B \
      --out "$OUT/fp8/engine-0.6b-base.json" > "$OUT/fp8/engine-0.6b-base.log" 2>&1 || echo "base bench failed"
  fi
  [[ -n "${PETAL_FP8_SKIP_BF16:-}" ]] || bench 0.6b-causal-bf16 0.6b-causal --scenarios throughput_100x512
  bench 0.6b-causal-fp8 0.6b-causal $FP8 --scenarios throughput_100x512
  [[ -n "${PETAL_FP8_SKIP_BF16:-}" ]] || bench 4b-bf16 4b-bidirectional --scenarios latency_1x128,throughput_100x512
  bench 4b-fp8 4b-bidirectional $FP8 --scenarios latency_1x128,throughput_100x512
fi
if [[ -z "${PETAL_FP8_SKIP_FIDELITY:-}" ]]; then
  L=1,7,16,77,128,300,512,1000,2048,4096,8191
  for m in 0.6b-bidirectional 0.6b-causal 4b-bidirectional; do
    echo "== fidelity $m"
    timeout 300 python3 scripts/gpu/compare_hf.py --model $M/$m --name "pplx-embed-v1-$m" --lengths $L \
      --variant "fp8=--quantize fp8 --fp8-min-tokens 0 --no-fp8-gate" --variant "fp8mlp=--quantize fp8 --fp8-layers mlp --fp8-min-tokens 0 --no-fp8-gate" --out "$OUT/fp8/fidelity-$m.json" || rc=1
  done
fi
python3 bench/fp8_report.py "$OUT/fp8" --markdown || true
exit $rc
