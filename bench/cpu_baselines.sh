#!/usr/bin/env bash
# The CPU engine report of issue 21, one run on the same cores: Petal's CPU engine (fast fp32, fast
# bf16 where the CPU has it, fast int8, the fp32 reference) and, in the same run,
# sentence-transformers on PyTorch CPU (fp32, bf16, bf16 autocast) and ONNX Runtime (ONNX export, fp32 and int8 dynamic quantisation), each at 1 and 2
# threads; MiniLM at 32 x 128 (throughput, each baseline at its best batch size) and 1 x 128
# (latency), Qwen3 shapes (made with `petal make-model`) at 1 x 128 and 8 x 512; fidelity of each
# Petal precision on the golden texts, against the goldens and the fp32 reference.
#   bash bench/cpu_baselines.sh          # everything: ~12 min (MiniLM, tiny Qwen3) + ~8 min (0.6b)
#   PETAL_BENCH_BIG= bash bench/cpu_baselines.sh            # without the 0.6b shape
#   PETAL_BENCH_QWEN= PETAL_BENCH_THREADS= bash bench/cpu_baselines.sh   # only the 0.6b shape
# Environment: PETAL_BENCH_SECONDS (per measurement, default 5), PETAL_BENCH_THREADS ("1 2"),
# PETAL_BENCH_QWEN (small Qwen3 shapes, full treatment; default qwen3-tiny), PETAL_BENCH_BIG (big
# shapes, short runs; default pplx-embed-v1-0.6b; empty = none), PETAL_BENCH_BIG_THREADS ("2"),
# PETAL_BENCH_BIG_RUNTIMES (torch_fp32,onnxruntime_fp32), PETAL_REF_PYTHON (a Python
# with bench/requirements-cpu.txt installed; default /work/refvenv/bin/python, else python3),
# PETAL_BENCH_RUNTIMES (baselines, default torch_fp32,torch_bf16,torch_autocast,onnxruntime), PETAL_BIN (default
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
THREADS="${PETAL_BENCH_THREADS-1 2}"
QWEN="${PETAL_BENCH_QWEN-qwen3-tiny}"
BIG="${PETAL_BENCH_BIG-pplx-embed-v1-0.6b}"
BIG_THREADS="${PETAL_BENCH_BIG_THREADS:-2}"
BIG_RUNTIMES="${PETAL_BENCH_BIG_RUNTIMES:-torch_fp32,onnxruntime_fp32}"
OUTD="${OUT:-.bench_out}/cpu_baselines"
mkdir -p "$OUTD/models"
MINILM=models/all-MiniLM-L6-v2
log() { printf '[cpu_baselines %s] %s (load %s)\n' "$(date +%H:%M:%S)" "$*" "$(cut -d' ' -f1-3 /proc/loadavg)"; }
# The CPU and the ISA flags the figures belong to (issue 30).
log "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
log "isa: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx_vnni|avx512.*|amx.*)$' | sort | tr '\n' ' ')"
# Petal's precisions: bf16 only where the CPU has AVX512-BF16 / AMX-BF16 (else it is refused).
PRECISIONS="fp32 int8 reference"
grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo && PRECISIONS="fp32 bf16 int8 reference"

petal() {  # name model threads batch len precision [golden]
  local name=$1 model=$2 t=$3 b=$4 l=$5 p=$6 golden=${7:-}
  local args=(--model "$model" --threads "$t" --batch "$b" --seq-len "$l" --seconds "$SECS"
              --min-batches "${MINB:-3}" --precision "$p" --warmup 1
              --out "$OUTD/petal-$name-t$t-${b}x$l-$p.json")
  [[ -n "$golden" ]] && args+=(--golden "$golden")
  log "petal $name ${b}x$l $p, $t threads"
  "$BIN/petal_cpu_bench" "${args[@]}" | grep -E 'texts/s|batch ms|fidelity' || true
}

baselines() {  # name st_model threads len batches latency_len [assemble_from]
  local name=$1 model=$2 t=$3 l=$4 batches=$5 ll=$6 from=${7:-}
  local args=(--model "$model" --threads "$t" --len "$l" --latency-len "$ll" --batches "$batches"
              --seconds "$SECS" --min-reps "${MINR:-10}" --out "$OUTD/baselines-$name-t$t-$l.json")
  [[ -n "$from" ]] && args+=(--assemble-from "$from")
  log "baselines $name len $l, $t threads"
  OMP_NUM_THREADS="$t" "$PY" bench/cpu_baselines.py "${args[@]}" || log "baselines $name failed"
}

for t in $THREADS; do
  for p in $PRECISIONS; do
    petal minilm "$MINILM" "$t" 32 128 "$p" tests/fixtures/golden_all-MiniLM-L6-v2.json
    petal minilm "$MINILM" "$t" 1 128 "$p"
  done
  baselines minilm "$MINILM" "$t" 128 8,16,32,64 128
done

make_models() {  # shape -> $dir (bidirectional) and $cdir (causal), made once
  local shape=$1
  dir="$OUTD/models/$shape-f32"; cdir="$OUTD/models/$shape-causal-f32"
  # sentence-transformers needs a tokenizer to load the folder (the timed inputs are ids).
  tok=(); [[ -f models/tokenizers/qwen3/tokenizer.json ]] && tok=(--tokenizer models/tokenizers/qwen3/tokenizer.json)
  [[ -f "$dir/model.safetensors" ]] || "$BIN/petal" make-model --shape "$shape" --dtype f32 --out "$dir" "${tok[@]}"
  [[ -f "$cdir/model.safetensors" ]] || "$BIN/petal" make-model --shape "$shape" --dtype f32 --attention causal --out "$cdir" "${tok[@]}"
}

# Qwen3 shapes. Petal runs the bidirectional checkpoint (pplx-embed's mask) and a causal one of
# the same shape: transformers' Qwen3 (and ONNX Runtime's export of it) attends causally whatever
# the config says, so the baselines are timed on the causal one and compared with Petal's causal rows.
for shape in $QWEN; do
  make_models "$shape"
  golden=""
  if [[ $shape == qwen3-tiny ]]; then
    # The tiny goldens keep their ids in a separate file; join them for --golden.
    golden="$OUTD/golden-$shape.json"
    "$PY" - "$golden" <<'EOF2'
import json, sys
g = json.load(open("tests/fixtures/golden_qwen3-tiny-bidir.json"))
ids = json.load(open("tests/fixtures/qwen3_tiny_inputs.json"))["sequences"]
json.dump({"sequences": ids, "embeddings": g["embeddings"]}, open(sys.argv[1], "w"))
EOF2
    # make-model's qwen3-tiny (seed 0) is the fixture's model only if the weights match.
    cmp -s "$dir/model.safetensors" tests/fixtures/qwen3-tiny-bidir/model.safetensors || golden=""
  fi
  for t in $THREADS; do
    for p in $PRECISIONS; do
      petal "$shape" "$dir" "$t" 1 128 "$p" "$golden"
      petal "$shape" "$dir" "$t" 8 512 "$p"
    done
    for p in ${PRECISIONS% reference}; do
      petal "$shape-causal" "$cdir" "$t" 1 128 "$p"
      petal "$shape-causal" "$cdir" "$t" 8 512 "$p"
    done
    baselines "$shape-128" "$OUTD/models/$shape-causal-st" "$t" 128 "" 128 "$cdir"
    baselines "$shape-512" "$OUTD/models/$shape-causal-st" "$t" 512 8 0 "$cdir"
  done
done

# Big Qwen3 shapes (default the 0.6b one, ~7-9 minutes on 2 cores): 8 x 512 is ~3.6 TFLOP, 25-40 s
# a batch, so one warm-up and one timed batch (three at 1 x 128), no reference path (80+ s a
# batch), no goldens, fewer runtimes and by default 2 threads only. bf16 too where the CPU has it.
BIG_PRECISIONS="fp32 int8"
[[ $PRECISIONS == *bf16* ]] && BIG_PRECISIONS="fp32 bf16 int8"
for shape in $BIG; do
  make_models "$shape"
  for t in $BIG_THREADS; do
    for p in $BIG_PRECISIONS; do SECS=2 MINB=3 petal "$shape-causal" "$cdir" "$t" 1 128 "$p"; done
    for p in $BIG_PRECISIONS; do SECS=0 MINB=1 petal "$shape-causal" "$cdir" "$t" 8 512 "$p"; done
    for p in ${BIG_PRECISIONS% int8}; do SECS=0 MINB=1 petal "$shape" "$dir" "$t" 8 512 "$p"; done
    SECS=2 MINR=3 PETAL_BENCH_RUNTIMES="$BIG_RUNTIMES" \
      baselines "$shape-128" "$OUTD/models/$shape-causal-st" "$t" 128 "" 128 "$cdir"
    SECS=0 MINR=1 PETAL_BENCH_RUNTIMES="$BIG_RUNTIMES" \
      baselines "$shape-512" "$OUTD/models/$shape-causal-st" "$t" 512 8 0 "$cdir"
  done
done

sha=$(git rev-parse --short=12 HEAD 2>/dev/null || echo nogit)
merged="bench/results/$(date -u +%Y-%m-%d)-cpu-baselines-$sha.json"
"$PY" bench/cpu_report.py "$OUTD" "$merged"
log "wrote $merged"
