#!/usr/bin/env bash
# GPU step (issue 32, session 27): the BERT family at the new CUDA defaults (the FFN's GELU in its
# tanh form inside cuBLASLt's epilogue; the warp-per-row BertEmbedding up to 512 wide).
#   0. The fused GEMMs' op cases (QKV + rope, bias + GELU: their epilogues' shared fragment load).
#   1. The BERT-family GPU tests bert_final could not carry: classify, colbert and sparse (their
#      committed goldens: HF / sentence-transformers fp32), and layouts again.
#   2. Nsight Compute kernel durations of one eager MiniLM-L6 16,384-token forward, summed per
#      kernel family (scripts/gpu/ncu_families.py), the default against PETAL_BERT_GELU=erf (the
#      same binary): issue 32's before / after table for MiniLM. Also 1 x 128.
# Bundle: PETAL_BUNDLE_ONLY="petal ops_gpu_test classify_gpu_test colbert_gpu_test
# sparse_gpu_test layouts_gpu_test". Carry `.gpu_bundle` and models/all-MiniLM-L6-v2/tokenizer.json.
# ~3 min. Results: $OUT/bert_check/{<test>.txt, ncu-*.csv, families-*.md}.
set -uo pipefail
D="$OUT/bert_check"
mkdir -p "$D"
rc=0
# The fused GEMMs' op cases (their epilogues now share BiasedFragment), timing cases left out.
timeout 200 .gpu_bundle/bin/ops_gpu_test \
  --gtest_filter='GemmFusedGpuTest.*:GemmBiasGeluGpuTest.*:-*Timing*' > "$D/ops.txt" 2>&1 || rc=1
grep -E '^\[  (PASSED|FAILED) |FAILED' "$D/ops.txt" | head -12
for t in classify colbert sparse layouts; do
  [[ -x .gpu_bundle/bin/${t}_gpu_test ]] || { echo "-- ${t}_gpu_test: not in the bundle"; rc=1; continue; }
  timeout 150 .gpu_bundle/bin/${t}_gpu_test > "$D/$t.txt" 2>&1 || rc=1
  echo "-- ${t}_gpu_test"
  grep -E 'worst|^\[  (PASSED|FAILED) |FAILED' "$D/$t.txt" | sort -u | head -16
done
M=/tmp/petal-models/minilm-bidirectional
[[ -f $M/model.safetensors ]] || python3 scripts/gpu/make_minilm_shape.py $M \
  --tokenizer models/all-MiniLM-L6-v2/tokenizer.json >/dev/null || exit 1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
[[ -n "$NCU" ]] || { echo "ncu not found"; exit 1; }
ARGS=(--model $M --backend cuda --max-batch-tokens 32768 --max-batch-seqs 128)
for sc in throughput_1024x128 latency_1x128; do
  for gelu in tanh erf; do
    PETAL_BERT_GELU=$gelu timeout 110 "$NCU" --clock-control none --metrics gpu__time_duration.sum \
      --csv .gpu_bundle/bin/petal bench engine "${ARGS[@]}" --no-graphs --no-check --seconds 0.1 \
      --max-iters 2 --scenarios $sc > "$D/ncu-$sc-$gelu.csv" 2> "$D/ncu-$sc-$gelu.err" ||
      { echo "ncu failed: $sc $gelu"; tail -3 "$D/ncu-$sc-$gelu.err"; rc=1; }
  done
  echo "-- $sc (tanh = the default, erf = PETAL_BERT_GELU=erf)"
  python3 scripts/gpu/ncu_families.py --start BertEmbedding "$D/ncu-$sc-tanh.csv" \
    "$D/ncu-$sc-erf.csv" | tee "$D/families-$sc.md" || rc=1
done
exit $rc
