#!/usr/bin/env bash
# The benchmark report of issue 9 in one run: every scenario for Petal (engine, gRPC server,
# HTTP gateway) and the baselines, merged into one JSON that bench/report.py turns into
# docs/benchmarks.md.
#
#   bash bench/run_gpu.sh          on the H200 machine (CUDA engine, pplx-embed-v1-0.6b shape)
#   bash bench/run_gpu.sh --cpu    on any machine (CPU engine, all-MiniLM-L6-v2, small counts)
#
# GPU run, in order: `petal make-model` (random weights, the real Qwen3 tokenizer so the gateway
# tokenizes like Qwen3), the accuracy gate (scripts/gpu/compare_hf.py: cosine >= 0.999 against HF
# transformers fp32), `petal bench engine`, `petal server` + `petal bench grpc` (scenarios 1-3),
# `petal gateway` in front of the same server + `petal bench http` (scenario 4), then the HF
# transformers baselines (eager, CUDA graph) and sentence-transformers. The same scenario shapes
# and random-id inputs everywhere; each step has a time limit and the whole run stops starting
# steps when its budget is spent, so it fits a 10-minute command (default budget 530 s). Last, on
# the GPU, the fp8 scenarios (issue 19; see "fp8" below): with the default budget they are often
# cut; run them on their own (scripts/gpu/steps/fp8_calib.sh) and merge with PETAL_FP8_RESULTS, or
# raise PETAL_BENCH_BUDGET_S.
#
# Where things are: `petal` from $PETAL, else PATH (run_on_device.sh puts .gpu_bundle/bin there),
# else .gpu_bundle/bin (unpacked here if needed), else build/cpu/bin (--cpu). Results go to
# $OUT/bench_report/ (OUT defaults to .bench_out): the merged <date>-<sha>[-cpu].json, each
# tool's own JSON and log. With --cpu the merged JSON is also copied into bench/results/.
#
# Environment: PETAL_BENCH_SECONDS (time per scenario; gpu 2, cpu 1), PETAL_BENCH_BUDGET_S,
# PETAL_HF_QUICK (set by default here; PETAL_HF_QUICK= for full HF runs), PETAL_SKIP_HF=1,
# PETAL_SKIP_ST=1, PETAL_ST_PYTHON (python with sentence-transformers; default python3),
# PETAL_SKIP_CPU_BASELINES=1 (--cpu: skip bench/cpu_baselines.sh), PETAL_REF_PYTHON,
# PETAL_QWEN3_TOKENIZER (default models/tokenizers/qwen3/tokenizer.json), PETAL_SKIP_FP8=1,
# PETAL_SKIP_FP8_4B=1, PETAL_FP8_RESULTS=DIR (an fp8_calib step's $OUT/fp8_calib). For a dry run of the
# GPU path elsewhere: PETAL_BENCH_BACKEND=cpu, PETAL_BENCH_SCENARIOS=latency_1x16,
# PETAL_BENCH_CONCURRENCY=1, PETAL_BENCH_WORDS=16 (the HF and ST steps then fail without CUDA).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
MODE=gpu
[[ "${1:-}" == --cpu ]] && MODE=cpu
OUT="${OUT:-$ROOT/.bench_out}"
R="$OUT/bench_report"
mkdir -p "$R"
rm -f "$R"/steps.tsv
T0=$SECONDS
BUDGET="${PETAL_BENCH_BUDGET_S:-530}"
say() { printf '[bench %s +%ds] %s\n' "$(date +%H:%M:%S)" "$((SECONDS - T0))" "$*"; }

# --- the petal binary ------------------------------------------------------------------------
find_petal() {
  if [[ -n "${PETAL:-}" ]]; then echo "$PETAL"; return; fi
  if [[ $MODE == cpu && -x build/cpu/bin/petal ]]; then echo "$ROOT/build/cpu/bin/petal"; return; fi
  if command -v petal >/dev/null 2>&1; then command -v petal; return; fi
  local b="$ROOT/.gpu_bundle"
  if [[ ! -x $b/bin/petal && -f $b/bundle.tar.xz ]]; then
    tar -C "$b" -xJf "$b/bundle.tar.xz" >&2 ||
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
        "$b/bundle.tar.xz" "$b"
  fi
  if [[ -x $b/bin/petal ]]; then
    export LD_LIBRARY_PATH="$b/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "$b/bin/petal"
    return
  fi
  [[ -x build/cpu/bin/petal ]] && echo "$ROOT/build/cpu/bin/petal"
}
PETAL_BIN="$(find_petal)"
[[ -n "$PETAL_BIN" ]] || { echo "no petal binary (build it, or carry .gpu_bundle)"; exit 1; }
say "mode $MODE, petal = $PETAL_BIN, results in $R"

# --- steps with time limits ------------------------------------------------------------------
# step NAME LIMIT_S CMD...: runs CMD under `timeout`, shortened to what is left of the budget;
# skipped when less than 15 s are left. Output to $R/NAME.log; status to $R/steps.tsv.
step() {
  local name="$1" limit="$2" left rc t=$SECONDS
  shift 2
  left=$((BUDGET - (SECONDS - T0)))
  ((limit > left)) && limit=$left
  if ((limit < 15)); then
    printf '%s\tskipped\t0\tbudget spent\n' "$name" >> "$R/steps.tsv"
    say "$name: skipped (budget of ${BUDGET}s spent)"
    return 1
  fi
  say "$name: start (limit ${limit}s)"
  timeout --kill-after=5 "$limit" "$@" > "$R/$name.log" 2>&1
  rc=$?
  local status=ok
  ((rc == 124 || rc == 137)) && status=timeout
  ((rc != 0 && rc != 124 && rc != 137)) && status="failed($rc)"
  printf '%s\t%s\t%d\t%s\n' "$name" "$status" "$((SECONDS - t))" "limit ${limit}s" >> "$R/steps.tsv"
  say "$name: $status in $((SECONDS - t))s"
  tail -n 12 "$R/$name.log" | sed 's/^/    /'
  return $rc
}
skip() { printf '%s\tskipped\t0\t%s\n' "$1" "$2" >> "$R/steps.tsv"; say "$1: skipped ($2)"; }

# Waits for a gRPC server (petal client health) or an HTTP gateway (/ready) to answer.
wait_grpc() { for _ in $(seq 1 "$2"); do "$PETAL_BIN" client --server "$1" health >/dev/null 2>&1 && return 0; sleep 0.5; done; return 1; }
wait_http() {
  for _ in $(seq 1 "$2"); do
    python3 -c 'import sys, urllib.request; urllib.request.urlopen("http://%s/ready" % sys.argv[1], timeout=1)' "$1" 2>/dev/null && return 0
    sleep 0.5
  done
  return 1
}
PIDS=()
# Stops what this script started: SIGTERM (they drain), SIGKILL after 20 s.
cleanup() {
  local p i
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do
    for i in $(seq 1 40); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$p" 2>/dev/null
  done
  wait 2>/dev/null
}
trap cleanup EXIT

# --- the model and per-mode settings ----------------------------------------------------------
if [[ $MODE == gpu ]]; then
  SECS="${PETAL_BENCH_SECONDS:-2}"
  M=/tmp/petal-models/pplx-embed-v1-0.6b-qwen3tok
  MODEL_NAME="pplx-embed-v1-0.6b (random weights, bf16, bidirectional + mean)"
  TOK="${PETAL_QWEN3_TOKENIZER:-$ROOT/models/tokenizers/qwen3/tokenizer.json}"
  ENGINE_FLAGS=(--backend "${PETAL_BENCH_BACKEND:-cuda}" --max-batch-tokens 32768 --max-batch-seqs 128)
  SCEN="${PETAL_BENCH_SCENARIOS:-}"  # empty: all
  ITERS=()
  CLIENTS=4
  CONC="${PETAL_BENCH_CONCURRENCY:-1,2,4,8,16}"
  if [[ ! -f $M/model.safetensors ]]; then
    tok_flag=()
    if [[ -f $TOK ]]; then tok_flag=(--tokenizer "$TOK"); else say "no Qwen3 tokenizer at $TOK: the HTTP scenario is skipped"; fi
    step make_model 90 "$PETAL_BIN" make-model --shape pplx-embed-v1-0.6b --attention bidirectional \
      "${tok_flag[@]}" --out "$M" || { say "make-model failed"; exit 1; }
    [[ -f $TOK ]] && cp "$(dirname "$TOK")/tokenizer_config.json" "$M/" 2>/dev/null
  fi
  step accuracy 100 python3 scripts/gpu/compare_hf.py --model "$M" --name pplx-embed-v1-0.6b \
    --petal "$PETAL_BIN" --lengths 16,128,512,1000 --out "$R/accuracy.json"
else
  SECS="${PETAL_BENCH_SECONDS:-1}"
  M="$ROOT/models/all-MiniLM-L6-v2"
  MODEL_NAME="all-MiniLM-L6-v2 (real weights, fp32)"
  ENGINE_FLAGS=(--backend cpu)
  # MiniLM holds 512 positions, and on a small CPU 100 x 512 takes many seconds per request:
  # smaller requests, fewer iterations, two throughput clients.
  SCEN=latency_1x128,latency_1x512,latency_5x512,throughput_32x128,throughput_8x512
  ITERS=(--max-iters 10)
  CLIENTS=2
  CONC=1,2,4
  [[ -f $M/model.safetensors ]] || { echo "no $M: run scripts/setup.sh"; exit 1; }
fi

# --- Petal: engine, gRPC, HTTP ---------------------------------------------------------------
step petal_engine 120 "$PETAL_BIN" bench engine --model "$M" "${ENGINE_FLAGS[@]}" --seconds "$SECS" "${ITERS[@]}" \
  ${SCEN:+--scenarios $SCEN} --out "$R/petal_engine.json"

GRPC=127.0.0.1:50161
HTTP=127.0.0.1:8161
"$PETAL_BIN" server --model "$M" --listen "$GRPC" "${ENGINE_FLAGS[@]}" --max-queue-tokens 4194304 \
  > "$R/server.log" 2>&1 &
PIDS+=($!)
if wait_grpc "$GRPC" 240; then
  step petal_grpc 120 "$PETAL_BIN" bench grpc --server "$GRPC" --seconds "$SECS" "${ITERS[@]}" --clients "$CLIENTS" \
    ${SCEN:+--scenarios $SCEN} --out "$R/petal_grpc.json"
  if [[ $MODE == gpu ]]; then
    # The same latency scenarios with clients that poll for the reply instead of sleeping: the
    # difference is the client's own wake-up (docs/performance.md).
    step petal_grpc_busypoll 40 "$PETAL_BIN" bench grpc --server "$GRPC" --seconds "$SECS" --busy-poll \
      --scenarios latency_1x128,latency_1x512,latency_5x512 --out "$R/petal_grpc_busypoll.json"
  fi
  if [[ -f $M/tokenizer.json ]]; then
    "$PETAL_BIN" gateway --model "$M" --server "$GRPC" --listen "$HTTP" > "$R/gateway.log" 2>&1 &
    PIDS+=($!)
    if wait_http "$HTTP" 60; then
      step petal_http 90 "$PETAL_BIN" bench http --gateway "$HTTP" --concurrency "$CONC" \
        --words "${PETAL_BENCH_WORDS:-510}" \
        --seconds "$SECS" "${ITERS[@]}" --out "$R/petal_http.json"
    else
      skip petal_http "gateway did not become ready (see gateway.log)"
    fi
  else
    skip petal_http "model folder has no tokenizer.json"
  fi
  "$PETAL_BIN" client --server "$GRPC" stats > "$R/server_stats.txt" 2>&1
else
  skip petal_grpc "server did not start (see server.log)"
  skip petal_http "server did not start"
fi
cleanup
PIDS=()

# --- baselines ------------------------------------------------------------------------------
HF_QUICK="${PETAL_HF_QUICK-1}"
if [[ $MODE == gpu && -z "${PETAL_SKIP_HF:-}" ]]; then
  step hf_transformers 150 env PYTHONUNBUFFERED=1 python3 bench/baselines/hf_transformers.py \
    --model "$M" --out "$R/hf.json" --modes eager,graph ${HF_QUICK:+--quick}
elif [[ $MODE == gpu ]]; then
  skip hf_transformers "PETAL_SKIP_HF set"
fi
ST_PY="${PETAL_ST_PYTHON:-python3}"
if [[ -n "${PETAL_SKIP_ST:-}" ]]; then
  skip sentence_transformers "PETAL_SKIP_ST set"
elif ! "$ST_PY" -c 'import sentence_transformers' 2>/dev/null; then
  skip sentence_transformers "sentence-transformers is not installed for $ST_PY (set PETAL_ST_PYTHON)"
elif [[ $MODE == gpu ]]; then
  step sentence_transformers 90 "$ST_PY" bench/baselines/sentence_transformers_bench.py \
    --assemble-from "$M" --model "$M-st" --device cuda --dtype bf16 --seconds "$SECS" \
    --out "$R/st.json"
else
  step sentence_transformers 150 "$ST_PY" bench/baselines/sentence_transformers_bench.py \
    --model "$M" --device cpu --dtype fp32 --seconds "$SECS" --max-iters 10 \
    --threads "$(nproc)" --scenarios "$SCEN" --out "$R/st.json"
fi

# --- fp8 (issue 19): engine scenarios in fp8 beside bf16, dynamic and static scales -----------
# `petal bench engine --quantize fp8 --no-fp8-gate` (the start-up gate refuses random weights),
# then `petal calibrate` (CUDA, bf16 path) and the same with --fp8-scales, then the worst cosine vs
# HF fp32 of the three over lengths 1..8191; the 0.6b model above at 1 x 128, 100 x 512,
# 100 x 4096, and the 4b shape at 1 x 128 and 100 x 512 beside its own bf16 figures. Files in
# $R/fp8/ are named as scripts/gpu/steps/fp8_calib.sh names them (engine-<shape>-<bf16|fp8|
# fp8static>.json, fidelity-*.json, calib-<shape>/), so merge_results.py --fp8-dir reads either:
# PETAL_FP8_RESULTS=DIR merges a separate fp8_calib run's folder instead of running this part.
# PETAL_SKIP_FP8=1 skips it, PETAL_SKIP_FP8_4B=1 its 4b part. Runs last: a spent budget skips it.
FP8_DIR="${PETAL_FP8_RESULTS:-$R/fp8}"
if [[ $MODE == gpu && -z "${PETAL_SKIP_FP8:-}" && -z "${PETAL_FP8_RESULTS:-}" ]]; then
  mkdir -p "$FP8_DIR"
  FP8=(--quantize fp8 --no-fp8-gate)
  cal_input() {  # model_dir: sets CAL and CAL_FLAGS (texts with a tokenizer, else random ids)
    if [[ -f $1/tokenizer.json ]]; then
      CAL=/tmp/petal-fp8-calibration-texts.jsonl CAL_FLAGS=()
      python3 bench/fp8_calibration_texts.py "$CAL"
    else
      CAL=/tmp/petal-fp8-calibration-ids.jsonl CAL_FLAGS=(--ids)
      python3 bench/fp8_calibration_texts.py "$CAL" --ids \
        "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$1/config.json")"
    fi
  }
  fp8_shape() {  # SHAPE MODEL_DIR SCENARIOS [bf16]
    local s=$1 m=$2 sc=$3
    if [[ "${4:-}" == bf16 ]]; then
      step "fp8_${s}_bf16" 120 "$PETAL_BIN" bench engine --model "$m" "${ENGINE_FLAGS[@]}" --seconds "$SECS" \
        --scenarios "$sc" --out "$FP8_DIR/engine-$s-bf16.json"
    fi
    step "fp8_${s}_dynamic" 120 "$PETAL_BIN" bench engine --model "$m" "${ENGINE_FLAGS[@]}" "${FP8[@]}" \
      --seconds "$SECS" --scenarios "$sc" --out "$FP8_DIR/engine-$s-fp8.json"
    cal_input "$m"
    if step "fp8_${s}_calibrate" 120 "$PETAL_BIN" calibrate --model "$m" --texts "$CAL" "${CAL_FLAGS[@]}" \
      --backend cuda --out "$FP8_DIR/calib-$s"; then
      step "fp8_${s}_static" 120 "$PETAL_BIN" bench engine --model "$m" "${ENGINE_FLAGS[@]}" "${FP8[@]}" \
        --fp8-scales "$FP8_DIR/calib-$s" --seconds "$SECS" --scenarios "$sc" --out "$FP8_DIR/engine-$s-fp8static.json"
    fi
  }
  fp8_shape 0.6b "$M" latency_1x128,throughput_100x512,throughput_100x4096
  if [[ -f $FP8_DIR/calib-0.6b/fp8_scales.json ]]; then
    step fp8_0.6b_fidelity 150 python3 scripts/gpu/compare_hf.py --model "$M" --name pplx-embed-v1-0.6b-bidirectional \
      --petal "$PETAL_BIN" --lengths 1,7,16,77,128,300,512,1000,2048,4096,8191 \
      --variant "fp8=${FP8[*]} --fp8-min-tokens 0" \
      --variant "fp8static=${FP8[*]} --fp8-scales $FP8_DIR/calib-0.6b --fp8-min-tokens 0" \
      --out "$FP8_DIR/fidelity-0.6b-bidirectional.json"
  fi
  if [[ -z "${PETAL_SKIP_FP8_4B:-}" ]]; then
    M4=/tmp/petal-models/pplx-embed-v1-4b
    [[ -f $M4/model.safetensors ]] || step make_model_4b 120 "$PETAL_BIN" make-model --shape pplx-embed-v1-4b \
      --attention bidirectional --out "$M4"
    [[ -f $M4/model.safetensors ]] && fp8_shape 4b "$M4" latency_1x128,throughput_100x512 bf16
  fi
elif [[ $MODE == gpu && -n "${PETAL_SKIP_FP8:-}" ]]; then
  skip fp8 "PETAL_SKIP_FP8 set"
fi

# The CPU engine's own report (issue 21): fast fp32 / int8 / reference paths against PyTorch and ONNX
# Runtime in the same run, on the same cores (bench/cpu_baselines.sh; the full version, with
# torch bf16 and the 0.6b shape, runs on its own: see docs/performance.md "CPU engine").
if [[ $MODE == cpu ]]; then
  if [[ -n "${PETAL_SKIP_CPU_BASELINES:-}" ]]; then
    skip cpu_baselines "PETAL_SKIP_CPU_BASELINES set"
  else
    step cpu_baselines 400 env PETAL_BENCH_QWEN=qwen3-tiny PETAL_BENCH_SECONDS="$SECS" \
      PETAL_BENCH_THREADS="$(nproc)" PETAL_BENCH_RUNTIMES="${PETAL_BENCH_RUNTIMES:-torch_fp32,onnxruntime}" \
      PETAL_REF_PYTHON="${PETAL_REF_PYTHON:-$ST_PY}" OUT="$R" bash bench/cpu_baselines.sh
  fi
fi

# --- merge --------------------------------------------------------------------------------------
CMD="bash bench/run_gpu.sh${1:+ $1}"
[[ -n "${PETAL_GPU_STEP:-}" ]] && CMD="bash scripts/gpu/run_on_device.sh $PETAL_GPU_STEP"
# The settings that change what is measured, as they were given.
for v in PETAL_BENCH_SECONDS PETAL_BENCH_BUDGET_S PETAL_HF_QUICK PETAL_SKIP_HF PETAL_SKIP_ST \
  PETAL_ST_PYTHON PETAL_BENCH_BACKEND PETAL_BENCH_SCENARIOS PETAL_BENCH_CONCURRENCY PETAL_BENCH_WORDS \
  PETAL_SKIP_FP8 PETAL_SKIP_FP8_4B PETAL_FP8_RESULTS; do
  [[ -n "${!v+x}" ]] && CMD="$v=${!v} $CMD"
done
python3 bench/merge_results.py --dir "$R" --mode "$MODE" --model "$M" --model-name "$MODEL_NAME" \
  --petal "$PETAL_BIN" --command "$CMD" --seconds-per-scenario "$SECS" --fp8-dir "$FP8_DIR" || exit 1
merged="$(cat "$R/merged_path.txt")"
if [[ $MODE == cpu ]]; then
  mkdir -p bench/results && cp "$merged" bench/results/
  say "copied to bench/results/$(basename "$merged"); next: .venv/bin/python bench/report.py"
else
  say "merged: $merged (copy it into bench/results/, then .venv/bin/python bench/report.py)"
fi
say "done in $((SECONDS - T0))s"
! grep -qv $'\tok\t\|\tskipped\t' "$R/steps.tsv"
