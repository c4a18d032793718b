#!/usr/bin/env bash
# GPU step (issue 32, session 24): this build's defaults against 2ee956c in one call, the
# scenarios the issue names that tuning_ab did not cover: MiniLM (1 x 128, 1024 x 128) over
# FINAL_MINILM_ROUNDS (2) rounds, fp8 100 x 512 (`--quantize fp8 --no-fp8-gate` on random
# weights) and bf16 1 x 128 / 100 x 512 on the 0.6b and 4b shapes, one round each. Carry
# `.gpu_bundle`, `.gpu_probe` and models/all-MiniLM-L6-v2/tokenizer.json.
# FINAL_PARTS (default "minilm fp8 defaults") picks the parts. Results in
# $OUT/bin_ab-{minilm,fp8,defaults}/.
set -uo pipefail
[[ -x .gpu_probe/base/petal ]] || { xz -dk .gpu_probe/base/petal.xz && chmod +x .gpu_probe/base/petal; }
rc=0
parts=" ${FINAL_PARTS:-minilm fp8 defaults} "
[[ $parts == *" minilm "* ]] && { BIN_AB_SHAPES=minilm BIN_AB_ROUNDS="${FINAL_MINILM_ROUNDS:-2}" BIN_AB_TAG=minilm \
  timeout 150 bash scripts/gpu/steps/bin_ab.sh || rc=1; }
[[ $parts == *" fp8 "* ]] && { BIN_AB_SHAPES="0.6b 4b" BIN_AB_ROUNDS=1 BIN_AB_SCENARIOS=throughput_100x512 \
  BIN_AB_ARGS="--quantize fp8 --no-fp8-gate" BIN_AB_TAG=fp8 \
  timeout 170 bash scripts/gpu/steps/bin_ab.sh || rc=1; }
[[ $parts == *" defaults "* ]] && { BIN_AB_SHAPES="0.6b 4b" BIN_AB_ROUNDS=1 \
  BIN_AB_SCENARIOS=latency_1x128,throughput_100x512 BIN_AB_TAG=defaults \
  timeout 130 bash scripts/gpu/steps/bin_ab.sh || rc=1; }
exit $rc
