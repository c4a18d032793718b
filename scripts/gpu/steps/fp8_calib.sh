#!/usr/bin/env bash
# GPU step: static fp8 activation scales (issue 19: `petal calibrate` + `--fp8-scales`) beside
# dynamic fp8 and bf16, in one run, on the random-weight Qwen3 shapes of fp8.sh:
#  1. calibrate the 0.6b bidirectional shape on a text file (CUDA engine, bf16 path, max of the
#     per-token maxima): 256 texts of ~16-2000 tokens (bench/fp8_calibration_texts.py) with the
#     real Qwen3 tokenizer (carry models/tokenizers/qwen3); without it, random token ids (--ids);
#  2. `petal bench engine` bf16 / fp8 dynamic / fp8 static at 100 x 512, 100 x 4096 and 1 x 128;
#  3. worst cosine vs HF fp32 over lengths 1..8191 for the three (scripts/gpu/compare_hf.py
#     --variant, every sequence in fp8: --fp8-min-tokens 0);
#  4. if the time budget allows (PETAL_FP8_CALIB_BUDGET_S, default 180 s, checked before it
#     starts), the 4b shape: calibrate, then 100 x 512 for the three.
# fp8 runs with --no-fp8-gate: the start-up gate refuses these random-weight models (see
# docs/performance.md, "FP8"). Results: $OUT/fp8_calib/ (engine-*.json, fidelity-*.json,
# calib-*/fp8_scales.json, calibrate-*.log) and a table on stdout (bench/fp8_report.py).
# Estimated (not yet run): 3-4 minutes for 0.6b on a fresh machine, 2-3 more for 4b (its
# make-model writes 8 GB); set PETAL_FP8_SKIP_4B=1 to keep it under 5 minutes for certain.
set -uo pipefail
D="$OUT/fp8_calib"
mkdir -p "$D"
T0=$SECONDS
BUDGET="${PETAL_FP8_CALIB_BUDGET_S:-180}"
M=/tmp/petal-models
mkdir -p $M
TOK=models/tokenizers/qwen3/tokenizer.json
rc=0
SECS="${PETAL_BENCH_SECONDS:-2}"
B="--backend cuda --max-batch-tokens 32768 --max-batch-seqs 128 --seconds $SECS"
FP8="--quantize fp8 --no-fp8-gate"
say() { printf '[fp8_calib +%ds] %s\n' "$((SECONDS - T0))" "$*"; }

# model NAME SHAPE: a random-weight bidirectional model, with the Qwen3 tokenizer when carried.
model() {
  local dir=$M/$1-bidirectional-qwen3tok tok=()
  [[ -f $TOK ]] && tok=(--tokenizer "$TOK") || dir=$M/$1-bidirectional
  [[ -f $dir/model.safetensors ]] ||
    petal make-model --shape pplx-embed-v1-$2 --attention bidirectional "${tok[@]}" --out "$dir" >&2
  echo "$dir"
}

# The calibration file: texts (with a tokenizer) or random ids of similar lengths
# (bench/fp8_calibration_texts.py: 256 inputs of ~16 to ~2,000 tokens).
if [[ -f $TOK ]]; then
  CAL=/tmp/petal-fp8-calibration-texts.jsonl
  python3 bench/fp8_calibration_texts.py "$CAL"
  CAL_FLAGS=()
else
  say "no $TOK: calibrating on random token ids"
  CAL=/tmp/petal-fp8-calibration-ids.jsonl
  python3 bench/fp8_calibration_texts.py "$CAL" --ids 151669
  CAL_FLAGS=(--ids)
fi

calibrate() {  # name model_dir
  say "calibrate $1"
  timeout 180 petal calibrate --model "$2" --texts "$CAL" "${CAL_FLAGS[@]}" --backend cuda \
    --out "$D/calib-$1" > "$D/calibrate-$1.log" 2>&1 || { say "calibrate $1 failed"; tail -5 "$D/calibrate-$1.log"; rc=1; return 1; }
  grep -A6 "^fp8 activation scales" "$D/calibrate-$1.log" || true
}
bench() {  # name model_dir args...
  local name=$1 model=$2; shift 2
  say "bench $name"
  timeout 200 petal bench engine --model "$model" $B "$@" --out "$D/engine-$name.json" \
    > "$D/engine-$name.log" 2>&1 || { say "bench $name failed"; tail -5 "$D/engine-$name.log"; rc=1; }
  grep -E "fp8 static|warm-up check" "$D/engine-$name.log" || true
}

M06=$(model 0.6b 0.6b)
if calibrate 0.6b "$M06"; then
  STATIC="--fp8-scales $D/calib-0.6b"
  SC=latency_1x128,throughput_100x512,throughput_100x4096
  bench 0.6b-bf16 "$M06" --scenarios $SC
  bench 0.6b-fp8 "$M06" $FP8 --scenarios $SC
  bench 0.6b-fp8static "$M06" $FP8 $STATIC --scenarios $SC
  if [[ -z "${PETAL_FP8_SKIP_FIDELITY:-}" ]]; then
    say "fidelity 0.6b"
    timeout 300 python3 scripts/gpu/compare_hf.py --model "$M06" --name pplx-embed-v1-0.6b-bidirectional \
      --lengths 1,7,16,77,128,300,512,1000,2048,4096,8191 \
      --variant "fp8=$FP8 --fp8-min-tokens 0" --variant "fp8static=$FP8 $STATIC --fp8-min-tokens 0" \
      --out "$D/fidelity-0.6b-bidirectional.json" || rc=1
  fi
fi
if ((SECONDS - T0 < BUDGET)) && [[ -z "${PETAL_FP8_SKIP_4B:-}" ]]; then
  M4=$(model 4b 4b)
  if calibrate 4b "$M4"; then
    bench 4b-bf16 "$M4" --scenarios throughput_100x512
    bench 4b-fp8 "$M4" $FP8 --scenarios throughput_100x512
    bench 4b-fp8static "$M4" $FP8 --fp8-scales "$D/calib-4b" --scenarios throughput_100x512
  fi
else
  say "4b skipped ($((SECONDS - T0)) s used of a ${BUDGET} s budget, or PETAL_FP8_SKIP_4B)"
fi
python3 bench/fp8_report.py "$D" --markdown || true
say "done"
exit $rc
