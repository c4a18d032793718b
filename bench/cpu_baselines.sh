#!/usr/bin/env bash
# The CPU engine report of issue 21, one run on the same cores: Petal's CPU engine (fast fp32, fast
# int8, the fp32 reference) and, in the same run, sentence-transformers on PyTorch CPU (fp32,
# bf16) and ONNX Runtime (ONNX export, fp32 and int8 dynamic quantisation), each at 1 and 2
# threads; MiniLM at 32 x 128 (throughput, each baseline at its best batch size) and 1 x 128
# (latency), Qwen3 shapes (made with `petal make-model`) at 1 x 128 and 8 x 512; fidelity of each
# Petal precision on the golden texts, against the goldens and the fp32 reference.
#   bash bench/cpu_baselines.sh                  # everything (0.6b shape included: ~25 min on 2 cores)
#   PETAL_BENCH_QWEN=qwen3-tiny bash bench/cpu_baselines.sh   # quick
# Environment: PETAL_BENCH_SECONDS (per measurement, default 5), PETAL_BENCH_THREADS ("1 2"),
# PETAL_BENCH_QWEN (shapes, default "qwen3-tiny pplx-embed-v1-0.6b"), PETAL_REF_PYTHON (a Python
# with bench/requirements-cpu.txt installed; default /work/refvenv/bin/python, else python3),
# PETAL_BENCH_RUNTIMES (baselines, default torch_fp32,torch_bf16,onnxruntime), PETAL_BIN (default
# build/cpu/bin), OUT (default .bench_out). Writes $OUT/cpu_baselines/*.json
# and the merged bench/results/<date>-cpu-baselines-<sha>.json (git SHA, machine, load, all).
# Measure on a quiet machine: `uptime` load is recorded before and after each step.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="${PETAL_BIN:-build/cpu/bin}"
PY="${PETAL_REF_PYTHON:-/work/refvenv/bin/python}"
[[ -x "$PY" ]] || PY=python3
SECS="${PETAL_BENCH_SECONDS:-5}"
THREADS="${PETAL_BENCH_THREADS:-1 2}"
QWEN="${PETAL_BENCH_QWEN:-qwen3-tiny pplx-embed-v1-0.6b}"
OUTD="${OUT:-.bench_out}/cpu_baselines"
mkdir -p "$OUTD/models"
MINILM=models/all-MiniLM-L6-v2
log() { printf '[cpu_baselines %s] %s (load %s)\n' "$(date +%H:%M:%S)" "$*" "$(cut -d' ' -f1-3 /proc/loadavg)"; }

petal() {  # name model threads batch len precision [golden]
  local name=$1 model=$2 t=$3 b=$4 l=$5 p=$6 golden=${7:-}
  local args=(--model "$model" --threads "$t" --batch "$b" --seq-len "$l" --seconds "$SECS"
              --precision "$p" --warmup 1 --out "$OUTD/petal-$name-t$t-${b}x$l-$p.json")
  [[ -n "$golden" ]] && args+=(--golden "$golden")
  log "petal $name ${b}x$l $p, $t threads"
  "$BIN/petal_cpu_bench" "${args[@]}" | grep -E 'texts/s|batch ms|fidelity' || true
}

baselines() {  # name st_model threads len batches latency_len [assemble_from]
  local name=$1 model=$2 t=$3 l=$4 batches=$5 ll=$6 from=${7:-}
  local args=(--model "$model" --threads "$t" --len "$l" --latency-len "$ll" --batches "$batches"
              --seconds "$SECS" --out "$OUTD/baselines-$name-t$t-$l.json")
  [[ -n "$from" ]] && args+=(--assemble-from "$from")
  log "baselines $name len $l, $t threads"
  OMP_NUM_THREADS="$t" "$PY" bench/cpu_baselines.py "${args[@]}" || log "baselines $name failed"
}

for t in $THREADS; do
  for p in fp32 int8 reference; do
    petal minilm "$MINILM" "$t" 32 128 "$p" tests/fixtures/golden_all-MiniLM-L6-v2.json
    petal minilm "$MINILM" "$t" 1 128 "$p"
  done
  baselines minilm "$MINILM" "$t" 128 8,16,32,64 128
done

for shape in $QWEN; do
  dir="$OUTD/models/$shape-f32"
  # sentence-transformers needs a tokenizer to load the folder (the timed inputs are ids).
  tok=(); [[ -f models/tokenizers/qwen3/tokenizer.json ]] && tok=(--tokenizer models/tokenizers/qwen3/tokenizer.json)
  [[ -f "$dir/model.safetensors" ]] || "$BIN/petal" make-model --shape "$shape" --dtype f32 --out "$dir" "${tok[@]}"
  golden=""
  if [[ $shape == qwen3-tiny ]]; then
    # The tiny goldens keep their ids in a separate file; join them for --golden.
    golden="$OUTD/golden-$shape.json"
    "$PY" - "$golden" <<'EOF'
import json, sys
g = json.load(open("tests/fixtures/golden_qwen3-tiny-bidir.json"))
ids = json.load(open("tests/fixtures/qwen3_tiny_inputs.json"))["sequences"]
json.dump({"sequences": ids, "embeddings": g["embeddings"]}, open(sys.argv[1], "w"))
EOF
    # make-model's qwen3-tiny (seed 0) is the fixture's model only if the weights match.
    cmp -s "$dir/model.safetensors" tests/fixtures/qwen3-tiny-bidir/model.safetensors || golden=""
  elif [[ $shape == pplx-embed-v1-0.6b ]]; then
    want=$("$PY" -c "import json;print(json.load(open('tests/fixtures/golden_qwen3-0.6b.json'))['model_safetensors_sha256'])")
    have=$(sha256sum "$dir/model.safetensors" | cut -d' ' -f1)
    [[ "$want" == "$have" ]] && golden=tests/fixtures/golden_qwen3-0.6b.json
  fi
  for t in $THREADS; do
    for p in fp32 int8 reference; do
      petal "$shape" "$dir" "$t" 1 128 "$p" "$golden"
      petal "$shape" "$dir" "$t" 8 512 "$p"
    done
    baselines "$shape-128" "$OUTD/models/$shape-st" "$t" 128 "" 128 "$dir"
    baselines "$shape-512" "$OUTD/models/$shape-st" "$t" 512 8 0 "$dir"
  done
done

sha=$(git rev-parse --short=12 HEAD 2>/dev/null || echo nogit)
merged="bench/results/$(date -u +%Y-%m-%d)-cpu-baselines-$sha.json"
"$PY" bench/cpu_report.py "$OUTD" "$merged"
log "wrote $merged"
