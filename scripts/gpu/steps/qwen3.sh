#!/usr/bin/env bash
# GPU step: Qwen3 correctness on the H200. Writes the random-weight pplx-embed-v1-0.6b checkpoint
# (bidirectional + mean, and causal + last token), compares Petal CUDA (and HF bf16) against HF
# fp32, and produces the tiny-fixture and 0.6b golden files for the CPU tests.
set -euo pipefail
mkdir -p "$OUT/qwen3"
M=/tmp/petal-models
mkdir -p $M
for v in bidirectional causal; do
  [[ -f $M/0.6b-$v/model.safetensors ]] || petal make-model --shape pplx-embed-v1-0.6b --attention $v --out $M/0.6b-$v
done
python3 scripts/gpu/golden_qwen3.py --out "$OUT/qwen3" || echo "golden tiny failed"
python3 scripts/gpu/golden_qwen3.py --shape 0.6b --model-dir $M/0.6b-bidirectional --out "$OUT/qwen3" || echo "golden 0.6b failed"
rc=0
for v in bidirectional causal; do
  python3 scripts/gpu/compare_hf.py --model $M/0.6b-$v --name "pplx-embed-v1-0.6b-$v" \
    --out "$OUT/qwen3/compare-0.6b-$v.json" ${PETAL_COMPARE_CPU:+--with-cpu} || rc=1
done
exit $rc
