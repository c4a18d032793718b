#!/usr/bin/env bash
# GPU step (issue 16): HF transformers' own bf16 run of every published layout on the GPU
# (scripts/gpu/golden_layouts.py --device cuda --dtype bfloat16) into $OUT/layouts_bf16/, then
# layouts_gpu_test against them (Petal CUDA bf16 not worse than HF bf16). Needs the tokenizer
# folders the layouts use: carry models/tokenizers, and the MiniLM tokenizer files (without
# weights) in .gpu_probe/minilm_tok/ (copied to models/all-MiniLM-L6-v2 here).
set -uo pipefail
D="$OUT/layouts_bf16"
mkdir -p "$D"
if [[ ! -f models/all-MiniLM-L6-v2/tokenizer.json && -d .gpu_probe/minilm_tok ]]; then
  mkdir -p models/all-MiniLM-L6-v2 && cp .gpu_probe/minilm_tok/* models/all-MiniLM-L6-v2/
fi
python3 scripts/gpu/golden_layouts.py --device cuda --dtype bfloat16 --out "$D" || exit 1
PETAL_HF_BF16_GOLDENS="$D" "$PETAL_BUNDLE"/bin/layouts_gpu_test 2>&1 | tee "$D/layouts_gpu_test.log" | grep -E "worst cosine|OK|FAILED|PASSED" | head -40
exit "${PIPESTATUS[0]}"
