#!/usr/bin/env bash
# GPU step (issue 18, long documents), ~5 minutes on the H200. On the pplx-embed-v1-0.6b shape
# (random weights; bidirectional + mean and causal + last token):
#  (a) single 8K / 16K / 32K-token sequences: Petal CUDA (bf16) and HF bf16 against HF fp32
#      (compare_hf.py --lean-masks; pass: worst cosine >= 0.999 and not worse than HF bf16);
#  (b) `petal bench engine`: one 32K-token document (p50, graphs on and --no-graphs: the graph
#      vs eager choice by measurement; flash and cuDNN attention forced, bidirectional) and 8 documents x 4K tokens x 16 chunks (late chunking,
#      chunks/s), with HF transformers (bf16, SDPA) doing the same in the same run
#      (longdoc_hf_bench.py).
# Also runs late_chunk_gpu_test (the MiniLM / tiny Qwen3 late-chunk goldens on the CUDA engine).
# Results: $OUT/longdoc/*.json and the log.
set -euo pipefail
mkdir -p "$OUT/longdoc"
M=/tmp/petal-models
for v in bidirectional causal; do
  [[ -f $M/0.6b-$v/model.safetensors ]] ||
    petal make-model --shape pplx-embed-v1-0.6b --attention $v --out $M/0.6b-$v
done
rc=0
# The bundle puts gpu-labelled tests in .gpu_bundle/bin, which is on PATH.
[[ -z "${LONGDOC_COMPARE_ONLY:-}" ]] && { PETAL_SOURCE_DIR=$PWD late_chunk_gpu_test || rc=1; }
# LONGDOC_COMPARE_ONLY=MASK: only the HF comparison of that mask (a re-run of one part).
if [[ -n "${LONGDOC_COMPARE_ONLY:-}" ]]; then
  python3 scripts/gpu/compare_hf.py --model $M/0.6b-$LONGDOC_COMPARE_ONLY \
    --name "0.6b-$LONGDOC_COMPARE_ONLY-long" --lean-masks --lengths 8192,16384,32768 \
    --out "$OUT/longdoc/compare-$LONGDOC_COMPARE_ONLY.json"
  exit
fi
for v in bidirectional causal; do
  python3 scripts/gpu/compare_hf.py --model $M/0.6b-$v --name "0.6b-$v-long" --lean-masks \
    --lengths 8192,16384,32768 --out "$OUT/longdoc/compare-$v.json" || rc=1
done
SECS="${PETAL_BENCH_SECONDS:-4}"
for v in bidirectional causal; do
  petal bench engine --model $M/0.6b-$v --backend cuda --max-batch-tokens 32768 \
    --max-batch-seqs 64 --seconds "$SECS" --scenarios latency_1x32768,latechunk_8x4096x16 \
    --out "$OUT/longdoc/petal-$v.json" || rc=1
  petal bench engine --model $M/0.6b-$v --backend cuda --max-batch-tokens 32768 \
    --max-batch-seqs 64 --seconds "$SECS" --scenarios latency_1x32768 --no-graphs \
    --out "$OUT/longdoc/petal-$v-eager.json" || rc=1
  if [[ $v == bidirectional ]]; then
    # Both attention backends forced at 32K (the default, auto, times them at first use).
    for a in flash cudnn; do
      petal bench engine --model $M/0.6b-$v --backend cuda --max-batch-tokens 32768 \
        --max-batch-seqs 64 --seconds 2 --scenarios latency_1x32768 --attention $a \
        --out "$OUT/longdoc/petal-$v-$a.json" || rc=1
    done
  fi
  PYTHONUNBUFFERED=1 python3 scripts/gpu/longdoc_hf_bench.py --model $M/0.6b-$v \
    --out "$OUT/longdoc/hf-$v.json" 2>&1 | grep -v "^Loading" || rc=1
done
exit $rc
