#!/usr/bin/env bash
# GPU step `new_outputs` (issue 31): the new model kinds through HTTP on the H200, each beside its
# Python reference on the same GPU in the same run (bf16 both sides):
#   sparse    SPLADE, 100 x 256-token texts per POST /embed_sparse   vs sentence-transformers
#             SparseEncoder.encode (batch 100)
#   classify  3-label classifier, 100 x 256 per POST /predict          vs transformers'
#             pipeline("text-classification") (batch 100)
#   colbert   ColBERT, 1 query x 100 x 256-token documents per POST /v1/score (MaxSim) vs a short
#             torch ColBERT (BertModel + Dense + L2 norm + MaxSim, PyLate's input shaping)
# Models: random weights of the BERT-base shape made here by scripts/gpu/make_new_output_models.py
# (the SPLADE decoder bias lowered so a text keeps ~200 non-zeros, as trained models do).
# Texts/s: Petal with 1 client and with 4 (scripts/gpu/new_outputs_bench.py), the reference as one
# process in a loop; both sides' outputs on the first 16 inputs are compared (cosine / non-zero
# sets, probabilities, scores). Target (issue 31): Petal >= 3x the reference.
# Carry .gpu_bundle and models/all-MiniLM-L6-v2 (its tokenizer files: tokenizer.json,
# tokenizer_config.json, special_tokens_map.json, vocab.txt; not the 90 MB weights).
# Before the measurements it runs sparse_gpu_test and ops_gpu_test's SparseMaxPool cases from the
# bundle (NEW_OUTPUTS_SKIP_TESTS=1 skips them; logs in $OUT/new_outputs/test-*.log).
# Env: PETAL_BENCH_SECONDS (default 10 per measurement), NEW_OUTPUTS_TASKS (default
# "sparse classify colbert"), NEW_OUTPUTS_MODELS (folder for the models; default
# /tmp/petal-new-outputs). Results: $OUT/new_outputs/{petal,ref}-TASK.json, serve-TASK.log,
# summary.json, summary.md. ~6-8 min. A dry run without a GPU (tiny models, CPU engine and torch on
# the CPU; needs `petal` on PATH and torch / transformers / sentence-transformers):
#   NEW_OUTPUTS_BACKEND=cpu NEW_OUTPUTS_TINY=1 PETAL_BENCH_SECONDS=2 OUT=/tmp/o \
#     bash scripts/gpu/steps/new_outputs.sh
set -uo pipefail
D="$OUT/new_outputs"
mkdir -p "$D"
M="${NEW_OUTPUTS_MODELS:-/tmp/petal-new-outputs}"
SECS="${PETAL_BENCH_SECONDS:-10}"
TASKS="${NEW_OUTPUTS_TASKS:-sparse classify colbert}"
BACKEND="${NEW_OUTPUTS_BACKEND:-cuda}"  # cpu: a dry run (torch on the CPU too)
DEVICE=cuda
[[ $BACKEND == cuda ]] || DEVICE=cpu
TINY=()
[[ "${NEW_OUTPUTS_TINY:-0}" == 1 ]] && TINY=(--tiny)
PY=scripts/gpu/new_outputs_bench.py
rc=0
say() { printf '[new_outputs %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# First the correctness checks of the CUDA SPLADE path, when the bundle has them (label gpu):
# sparse_gpu_test (CUDA bf16 vs CPU fp32) and the SparseMaxPool op cases.
if [[ $BACKEND == cuda && "${NEW_OUTPUTS_SKIP_TESTS:-0}" != 1 ]]; then
  for t in sparse_gpu_test "ops_gpu_test --gtest_filter=OpsGpuTest3.SparseMaxPool"; do
    name=${t%% *}
    if command -v "$name" > /dev/null; then
      say "== $t"
      # shellcheck disable=SC2086  # the filter is a separate word
      if timeout 600 $t > "$D/test-$name.log" 2>&1; then
        grep -E "^chunk|PASSED|SparseMaxPool" "$D/test-$name.log" | tail -8
      else
        say "$name FAILED:"; grep -E "Failure|FAILED|error" "$D/test-$name.log" | head -20; rc=1
      fi
    else
      say "$name is not in the bundle: skipped"
    fi
  done
fi

say "models -> $M"
if ! timeout 600 python3 scripts/gpu/make_new_output_models.py "$M" --device $DEVICE "${TINY[@]}" \
    --tokenizer models/all-MiniLM-L6-v2 > "$D/make_models.log" 2>&1; then
  say "could not make the model folders:"; tail -20 "$D/make_models.log"; exit 1
fi
cat "$D/make_models.log"

# Starts `petal serve` on the model, waits for /ready; sets SERVE_PID and PORT.
start_serve() {
  local model=$1 log=$2
  petal serve --model "$model" --backend "$BACKEND" --listen 127.0.0.1:0 --shutdown-grace-ms 1000 \
    --chunk-max-sequences 128 --chunk-max-tokens 32768 --server-arg=--max-batch-tokens=32768 \
    --server-arg=--max-batch-seqs=128 > "$log" 2>&1 &
  SERVE_PID=$!
  PORT=""
  for _ in $(seq 1 1200); do  # 120 s
    PORT=$(grep -oE 'gateway listening.* port=[0-9]+' "$log" | grep -oE '[0-9]+$' | head -1)
    if [[ -n "$PORT" ]] && env -u LD_LIBRARY_PATH curl -sf "http://127.0.0.1:$PORT/ready" > /dev/null; then
      return 0
    fi
    kill -0 $SERVE_PID 2>/dev/null || break
    sleep 0.1
  done
  say "petal serve did not become ready; last lines of $log:"; tail -20 "$log"
  stop_serve
  return 1
}
stop_serve() {
  [[ -n "${SERVE_PID:-}" ]] || return 0
  kill -TERM "$SERVE_PID" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$SERVE_PID" 2>/dev/null
  wait "$SERVE_PID" 2>/dev/null
  SERVE_PID=""
}
trap stop_serve EXIT

for t in $TASKS; do
  case $t in sparse) m=$M/splade ;; classify) m=$M/classifier ;; colbert) m=$M/colbert ;;
    *) say "unknown task $t"; rc=1; continue ;; esac
  say "== $t: petal serve ($m)"
  if start_serve "$m" "$D/serve-$t.log"; then
    timeout 300 python3 $PY petal $t --model "$m" --url "http://127.0.0.1:$PORT" --seconds "$SECS" \
      --out "$D/petal-$t.json" || { say "petal $t failed"; rc=1; }
    env -u LD_LIBRARY_PATH curl -s "http://127.0.0.1:$PORT/metrics" > "$D/metrics-$t.txt" || true
    stop_serve
  else
    rc=1
  fi
  say "== $t: reference"
  timeout 300 python3 $PY reference $t --model "$m" --seconds "$SECS" --device $DEVICE \
    --petal-json "$D/petal-$t.json" --out "$D/ref-$t.json" || { say "reference $t failed"; rc=1; }
done

python3 - "$D" "$BACKEND" <<'PY' || rc=1
import json, os, sys
d, backend = sys.argv[1], sys.argv[2]
what = {"sparse": ("SPLADE /embed_sparse, 100 x 256", "SparseEncoder bf16"),
        "classify": ("classifier /predict, 100 x 256", "pipeline bf16"),
        "colbert": ("ColBERT /v1/score, 1 x 100 x 256", "torch ColBERT bf16")}
def load(n):
    p = os.path.join(d, n)
    return json.load(open(p)) if os.path.exists(p) else None
rows, summary = [], {}
for t, (name, ref_name) in what.items():
    p, r = load("petal-%s.json" % t), load("ref-%s.json" % t)
    if not p and not r:
        continue
    p1 = p["runs"][0]["texts_per_s"] if p else None
    p4 = p["runs"][1]["texts_per_s"] if p else None
    rr = r["runs"][0]["texts_per_s"] if r else None
    s = {"petal_1_client": p1, "petal_4_clients": p4, "reference": rr,
         "x_1_client": p1 / rr if p1 and rr else None, "x_4_clients": p4 / rr if p4 and rr else None,
         "agreement": (r or {}).get("agreement"), "petal_shape": (p or {}).get("shape"),
         "reference_shape": (r or {}).get("shape")}
    summary[t] = s
    f = lambda v, fmt="%.0f": fmt % v if v is not None else "-"
    rows.append("| %s | %s | %s | %s (%s) | %s | %s | %s |" % (
        name, f(p1), f(p4), f(rr), ref_name, f(s["x_1_client"], "%.2fx"), f(s["x_4_clients"], "%.2fx"),
        json.dumps(s["agreement"]) if s["agreement"] else "-"))
where = "the GPU" if backend == "cuda" else "a CPU dry run (tiny models?), not a measurement"
md = ["# new_outputs (issue 31): texts (documents) per second through HTTP, on " + where, "",
      "| task | Petal, 1 client | Petal, 4 clients | reference | ratio (1 client) | ratio (4 clients) | agreement (first 16 inputs) |",
      "|---|---|---|---|---|---|---|"] + rows + ["", "Target: >= 3x the reference. Both sides bf16 on the same GPU (Petal fp32 on the CPU); see petal-*.json / ref-*.json."]
open(os.path.join(d, "summary.md"), "w").write("\n".join(md) + "\n")
json.dump(summary, open(os.path.join(d, "summary.json"), "w"), indent=1)
print("\n".join(md))
PY
exit $rc
