#!/usr/bin/env bash
# GPU step (issue 32, session 26): two BERT changes not yet run on a GPU, the warp-per-row
# BertEmbedding and the FFN's GELU in cuBLASLt's epilogue (tanh form, PETAL_BERT_GELU=tanh).
# Written for bundle a99ffdb, whose defaults were both (the next commit made them opt-in until
# measured; with a later bundle, `new` is whatever it ships). First the embedding and norm op
# cases; then the BERT-family GPU tests at the bundle's defaults against their committed goldens
# (layouts: HF fp32 / bf16; rerank: cross-encoder logits; classify, colbert and sparse when the
# bundle has them: they do not fit the 64 MiB carry beside the rest); then bin_ab with four
# sides: the bundle (`new`), the bundle with PETAL_BERT_GELU=erf (`erf`), 02e17e2 (`s26a`,
# .gpu_probe/s26a/petal.xz: exact GELU, one block a row for the embedding) and 2ee956c (`base`);
# MiniLM over two rounds, BERT-base over one.
# Bundle: PETAL_BUNDLE_ONLY="petal ops_gpu_test layouts_gpu_test rerank_gpu_test". Carry
# `.gpu_bundle`, `.gpu_probe/base`, `.gpu_probe/s26a` and models/all-MiniLM-L6-v2/tokenizer.json.
# ~5 min. Results: $OUT/bert_final/{ops,<test>}.txt, $OUT/bin_ab-bert-{minilm,base}/.
set -uo pipefail
D="$OUT/bert_final"
mkdir -p "$D"
rc=0
timeout 120 .gpu_bundle/bin/ops_gpu_test \
  --gtest_filter='OpsGpuTest.BertEmbedding*:OpsGpuTest.Add*Norm*' > "$D/ops.txt" 2>&1 || rc=1
grep -E '^\[  (PASSED|FAILED) |FAILED' "$D/ops.txt" | head -20
for t in layouts rerank classify colbert sparse; do
  [[ -x .gpu_bundle/bin/${t}_gpu_test ]] || { echo "-- ${t}_gpu_test: not in the bundle"; continue; }
  timeout 120 .gpu_bundle/bin/${t}_gpu_test > "$D/$t.txt" 2>&1 || rc=1
  echo "-- ${t}_gpu_test"
  grep -E 'worst cosine|^\[  (PASSED|FAILED) |FAILED' "$D/$t.txt" | head -12
done
for b in base s26a; do
  [[ -x .gpu_probe/$b/petal ]] || { xz -dk .gpu_probe/$b/petal.xz && chmod +x .gpu_probe/$b/petal; }
done
printf '#!/bin/sh\nPETAL_BERT_GELU=erf exec %s "$@"\n' "$PWD/.gpu_bundle/bin/petal" > /tmp/petal-erf
chmod +x /tmp/petal-erf
sides="new=.gpu_bundle/bin/petal erf=/tmp/petal-erf s26a=.gpu_probe/s26a/petal"
sides+=" base=.gpu_probe/base/petal"
BIN_AB_BINS="$sides" BIN_AB_SHAPES=minilm BIN_AB_ROUNDS=2 BIN_AB_TAG=bert-minilm \
  timeout 200 bash scripts/gpu/steps/bin_ab.sh || rc=1
BIN_AB_BINS="$sides" BIN_AB_SHAPES=bertbase BIN_AB_ROUNDS=1 BIN_AB_TAG=bert-base \
  BIN_AB_SCENARIOS=latency_1x128,throughput_1024x128 timeout 150 bash scripts/gpu/steps/bin_ab.sh ||
  rc=1
exit $rc
