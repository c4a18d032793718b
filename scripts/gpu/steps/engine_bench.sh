#!/usr/bin/env bash
# GPU step: engine-level benchmark on the pplx-embed-v1-0.6b random-weight shape (bf16,
# bidirectional + mean): `petal bench engine` and, in the same run, the HF transformers baselines
# (eager and CUDA graph). Results JSON in $OUT/bench/ (kernel_bench.sh has the micro-benchmarks).
set -euo pipefail
mkdir -p "$OUT/bench"
M=/tmp/petal-models/0.6b-bidirectional
[[ -f $M/model.safetensors ]] || petal make-model --shape pplx-embed-v1-0.6b --attention bidirectional --out $M
SECS="${PETAL_BENCH_SECONDS:-4}"
petal bench engine --model $M --backend cuda --max-batch-tokens "${PETAL_BENCH_MAX_TOKENS:-32768}" \
  --max-batch-seqs 128 --seconds "$SECS" ${PETAL_BENCH_SCENARIOS:+--scenarios $PETAL_BENCH_SCENARIOS} \
  --out "$OUT/bench/petal-engine.json"
if [[ -z "${PETAL_SKIP_HF:-}" ]]; then
  PYTHONUNBUFFERED=1 python3 bench/baselines/hf_transformers.py --model $M --out "$OUT/bench/hf.json" \
    --modes "${PETAL_HF_MODES:-eager,graph}" ${PETAL_HF_QUICK:+--quick} 2>&1 | grep -v "^Loading" || true
fi
# One file with both engines, the machine and the command, for bench/results/ and the report.
python3 - "$OUT/bench" <<'PY2'
import json, os, subprocess, sys
d = sys.argv[1]
load = lambda f: json.load(open(os.path.join(d, f))) if os.path.exists(os.path.join(d, f)) else None
smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip()
json.dump({"petal": load("petal-engine.json"), "hf": load("hf.json"), "machine": smi,
           "command": "bash scripts/gpu/run_on_device.sh engine_bench"},
          open(os.path.join(d, "engine-combined.json"), "w"), indent=1)
PY2
python3 bench/engine_report.py "$OUT/bench/engine-combined.json"
