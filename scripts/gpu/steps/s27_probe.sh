#!/usr/bin/env bash
# GPU step (issue 32, session 27), two probes in one call:
#   1. swiglu_ncu (the fused SwiGLU GEMM against cuBLASLt at 32,768 tokens, Nsight full sections);
#   2. the 128-key flash attention variants for head_dim 32 / 64: attention_gpu_test (every
#      variant against the reference), then bin_ab on MiniLM and BERT-base with variant timing on
#      (PETAL_ATTN_VARIANTS=1), this bundle against .gpu_probe/s27a (031660f: the same code
#      without those variants), and this bundle at its default (no variant timing).
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
# Variant timing is off by default (PETAL_ATTN_VARIANTS=1 turns it on), so the sides are: this
# build with it (the new variants among the candidates), 031660f with it (the old set), and this
# build without it (the default variant).
wrap() {  # name binary: the binary with PETAL_ATTN_VARIANTS=1
  printf '#!/bin/sh\nPETAL_ATTN_VARIANTS=1 exec %s "$@"\n' "$2" > "/tmp/petal-$1"
  chmod +x "/tmp/petal-$1"
  echo "$1=/tmp/petal-$1"
}
sides="$(wrap newv "$PWD/.gpu_bundle/bin/petal") $(wrap oldv "$PWD/$b/petal") default=.gpu_bundle/bin/petal"
BIN_AB_BINS="$sides" BIN_AB_SHAPES=minilm BIN_AB_ROUNDS=2 BIN_AB_TAG=attn \
  timeout 170 bash scripts/gpu/steps/bin_ab.sh || rc=1
BIN_AB_BINS="$sides" BIN_AB_SHAPES=bertbase BIN_AB_ROUNDS=1 BIN_AB_TAG=attn-base \
  timeout 110 bash scripts/gpu/steps/bin_ab.sh || rc=1
grep -H "seqs=1 max_len=128\|seqs=128 max_len=128" "$OUT"/bin_ab-attn*/*-r1.json.kernels.txt 2>/dev/null |
  sed 's|.*/||'
timeout 280 bash scripts/gpu/steps/swiglu_ncu.sh || rc=1
exit $rc
