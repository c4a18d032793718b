#!/usr/bin/env bash
# GPU step (issue 32, session 27), two probes in one call:
#   1. swiglu_ncu (the fused SwiGLU GEMM against cuBLASLt at 32,768 tokens, Nsight full sections);
#   2. the 128-key flash attention variants for head_dim 32 / 64: attention_gpu_test (every
#      variant against the reference), then bin_ab on MiniLM and BERT-base, this bundle against
#      .gpu_probe/s27a (031660f: the same code without those variants; the tuner picks a variant
#      per shape at load, so a difference is the new variants' doing).
# Bundle: PETAL_BUNDLE_ONLY="petal ops_gpu_test attention_gpu_test". Carry `.gpu_bundle`,
# `.gpu_probe/s27a` and models/all-MiniLM-L6-v2/tokenizer.json. ~5 min.
set -uo pipefail
rc=0
D="$OUT/s27_probe"
mkdir -p "$D"
timeout 150 .gpu_bundle/bin/attention_gpu_test > "$D/attention.txt" 2>&1 || rc=1
grep -E '^\[  (PASSED|FAILED) |FAILED' "$D/attention.txt" | head -10
b=.gpu_probe/s27a
[[ -x $b/petal ]] || { xz -dk $b/petal.xz && chmod +x $b/petal; }
BIN_AB_BINS="new=.gpu_bundle/bin/petal s27a=$b/petal" BIN_AB_SHAPES=minilm \
  BIN_AB_ROUNDS=2 BIN_AB_TAG=attn timeout 150 bash scripts/gpu/steps/bin_ab.sh || rc=1
BIN_AB_BINS="new=.gpu_bundle/bin/petal s27a=$b/petal" BIN_AB_SHAPES=bertbase \
  BIN_AB_ROUNDS=1 BIN_AB_TAG=attn-base timeout 100 bash scripts/gpu/steps/bin_ab.sh || rc=1
grep -h "seqs=1 max_len=128\|seqs=128 max_len=128" "$OUT"/bin_ab-attn*/*-r1.json.kernels.txt 2>/dev/null
timeout 280 bash scripts/gpu/steps/swiglu_ncu.sh || rc=1
exit $rc
