#!/usr/bin/env bash
# GPU step (issues 29 and 32 ask for "the new build and the 2ee956c build in the same run"):
# `petal bench engine` on random-weight shapes for two or more `petal` binaries, alternating over
# BIN_AB_ROUNDS rounds so drift shows. Every run does the warm-up check against the CPU reference.
# Env: BIN_AB_BINS (space-separated NAME=PATH; default "new=.gpu_bundle/bin/petal
# base=.gpu_probe/base/petal"; a missing binary is skipped with a line saying so), BIN_AB_SHAPES
# (default "0.6b 4b"; "minilm" is the all-MiniLM-L6-v2 layout with random weights, made by
# scripts/gpu/make_minilm_shape.py from models/all-MiniLM-L6-v2/tokenizer.json, which must be carried;
# "bertbase" the same at BERT-base's size),
# BIN_AB_ROUNDS (default 2), BIN_AB_SCENARIOS (replaces the per-shape list),
# BIN_AB_ARGS (extra `petal bench engine` flags, e.g. "--quantize fp8 --no-fp8-gate"), BIN_AB_TAG
# (suffix of the results folder). The models are made by the first binary.
# Results: $OUT/bin_ab[-TAG]/<shape>-<name>-r<round>.json, summary.md.
set -uo pipefail
D="$OUT/bin_ab${BIN_AB_TAG:+-$BIN_AB_TAG}"
mkdir -p "$D"
SECS="${PETAL_BENCH_SECONDS:-2}"
read -r -a BINS <<< "${BIN_AB_BINS:-new=.gpu_bundle/bin/petal base=.gpu_probe/base/petal}"
have=()
for b in "${BINS[@]}"; do
  if [[ -x "${b#*=}" ]]; then have+=("$b"); else echo "${b%%=*}: ${b#*=} is not here: skipped"; fi
done
((${#have[@]})) || { echo "no binary to run"; exit 1; }
first="${have[0]#*=}"
rc=0
for shape in ${BIN_AB_SHAPES:-0.6b 4b}; do
  M=/tmp/petal-models/$shape-bidirectional
  sc=latency_1x128,latency_1x512,latency_1x4096,throughput_100x512
  if [[ $shape == minilm || $shape == bertbase ]]; then
    [[ -f $M/model.safetensors ]] || python3 scripts/gpu/make_minilm_shape.py $M \
      --tokenizer models/all-MiniLM-L6-v2/tokenizer.json $([[ $shape == bertbase ]] && echo --base) \
      >/dev/null || { rc=1; continue; }
    sc=latency_1x128,throughput_1024x128
  else
    [[ -f $M/model.safetensors ]] ||
      "$first" make-model --shape pplx-embed-v1-$shape --attention bidirectional --out $M >/dev/null
  fi
  [[ $shape == 4b ]] && sc=latency_1x128,latency_1x512,throughput_100x512
  [[ -n "${BIN_AB_SCENARIOS:-}" ]] && sc=$BIN_AB_SCENARIOS
  for r in $(seq 1 "${BIN_AB_ROUNDS:-2}"); do
    for b in "${have[@]}"; do
      name=${b%%=*} bin=${b#*=}
      echo "== $shape $name round $r"
      # shellcheck disable=SC2086  # BIN_AB_ARGS is a list of flags
      "$bin" bench engine --model $M --backend cuda --max-batch-tokens 32768 --max-batch-seqs 128 \
        --seconds "$SECS" --scenarios $sc ${BIN_AB_ARGS:-} --out "$D/$shape-$name-r$r.json" |
        grep -E 'latency|throughput|check' || rc=1
    done
  done
done
python3 scripts/gpu/ab_table.py "$D" || rc=1
exit $rc
