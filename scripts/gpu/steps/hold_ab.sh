#!/usr/bin/env bash
# GPU step (issue 29): the partial-batch hold (`--batch-hold-lead-us`) against no hold, 16 clients
# x 511 words through `petal serve` (one local replica) on the pplx-embed-v1-0.6b random-weight
# shape with the Qwen3 tokenizer (carry models/tokenizers/qwen3):
#  1. the engine alone at the mix: throughput_16x512, throughput_8x512 (and 100 x 512);
#  2. HOLD_ROUNDS rounds (default 3) of `petal serve` with the hold (default lead) and with
#     `--batch-hold-lead-us=-1`, alternating; each: `petal bench http --concurrency 16 --words 511`
#     (HOLD_SECONDS, default 8) and the server's batch sizes from /metrics.
# Results: $OUT/hold_ab/*.json, *.log, summary.md. ~4 min. HOLD_SCENARIOS / HOLD_ENGINE_SECONDS
# shorten part 1.
set -uo pipefail
D="$OUT/hold_ab"
mkdir -p "$D"
M="${HOLD_MODEL:-/tmp/petal-models/0.6b-bidirectional-qwen3tok}"
[[ -f $M/model.safetensors ]] || petal make-model --shape pplx-embed-v1-0.6b --attention bidirectional \
  --tokenizer models/tokenizers/qwen3/tokenizer.json --out $M >/dev/null
SECS="${HOLD_SECONDS:-8}"
rc=0
echo "== 1. engine"
timeout 300 petal bench engine --model $M --backend cuda --max-batch-tokens 32768 --max-batch-seqs 128 \
  --seconds "${HOLD_ENGINE_SECONDS:-4}" --scenarios "${HOLD_SCENARIOS:-throughput_16x512,throughput_8x512,throughput_100x512}" --out "$D/engine.json" \
  > "$D/engine.log" 2>&1 || { tail -5 "$D/engine.log"; rc=1; }
grep -E "throughput" "$D/engine.log"
PORT=18490
for r in $(seq 1 "${HOLD_ROUNDS:-3}"); do
  for t in hold nohold; do
    extra=(); [[ $t == nohold ]] && extra=(--server-arg=--batch-hold-lead-us=-1)
    petal serve --model $M --backend cuda --port $PORT --replica-transport local "${extra[@]}" \
      > "$D/serve-$t-r$r.log" 2>&1 &
    pid=$!
    up=0
    for _ in $(seq 1 600); do env -u LD_LIBRARY_PATH curl -sf -o /dev/null http://127.0.0.1:$PORT/health && { up=1; break; }; sleep 0.25; done
    if ((up == 0)); then echo "serve ($t) did not start"; tail -5 "$D/serve-$t-r$r.log"; kill $pid; rc=1; continue; fi
    timeout 120 petal bench http --gateway 127.0.0.1:$PORT --concurrency 16 --words 511 --seconds "$SECS" \
      --warmup-seconds 2 --out "$D/http-$t-r$r.json" 2>&1 | grep -v curl > "$D/http-$t-r$r.log"
    env -u LD_LIBRARY_PATH curl -s http://127.0.0.1:$PORT/metrics > "$D/metrics-$t-r$r.txt"
    b=$(awk '/batch_sequences_sum/{s=$2} /batch_sequences_count/{c=$2} END{if (c>0) printf "%.2f", s/c}' "$D/metrics-$t-r$r.txt")
    echo "$t round $r: $(grep -E 'concurrency 16' "$D/http-$t-r$r.log" | sed 's/  */ /g'); $b sequences per batch"
    kill -INT $pid; wait $pid 2>/dev/null
  done
done | tee "$D/summary.md"
exit $rc
