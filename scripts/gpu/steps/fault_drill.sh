#!/usr/bin/env bash
# GPU step (issue 29): one replica fault under load on the H200, with 0 requests lost.
#  1. `petal serve --replica-transport local --replicas 2` (two engines on the GPU, in the
#     gateway's process); 4 clients x 511 words for FD_SECONDS (default 10) through
#     bench/http_load.py; after 3 s, SIGUSR1: replica-0's next batch is an engine fault, its
#     chunks are retried on replica-1 and its engine is rebuilt (local_replica.h).
#  2. the same with `--replica-transport unix`, and `kill -9` of one replica process instead (the
#     supervisor restarts it).
# Each prints the client's totals (errors must be 0) and the serve log's fault/restart lines.
# Results: $OUT/fault_drill/*.json, *.log. ~1 min.
set -uo pipefail
D="$OUT/fault_drill"
mkdir -p "$D"
M=/tmp/petal-models/0.6b-bidirectional-qwen3tok
[[ -f $M/model.safetensors ]] || petal make-model --shape pplx-embed-v1-0.6b --attention bidirectional \
  --tokenizer models/tokenizers/qwen3/tokenizer.json --out $M >/dev/null
SECS="${FD_SECONDS:-10}"
PORT=18490
rc=0
for t in local unix; do
  echo "== $t: 2 replicas, 4 clients x 511 words for ${SECS}s, a fault after 3 s"
  petal serve --model $M --backend cuda --port $PORT --replicas 2 --replica-transport $t \
    > "$D/serve-$t.log" 2>&1 &
  pid=$!
  up=0
  for _ in $(seq 1 600); do curl -sf -o /dev/null http://127.0.0.1:$PORT/health && { up=1; break; }; sleep 0.25; done
  if ((up == 0)); then echo "serve ($t) did not start"; tail -5 "$D/serve-$t.log"; kill $pid; rc=1; continue; fi
  # warm every bucket the load uses before the fault, so the timing is not the first capture's
  python3 bench/http_load.py --url http://127.0.0.1:$PORT --clients 4 --words 511 --seconds 2 --warmup 0 \
    > /dev/null 2>&1
  python3 bench/http_load.py --url http://127.0.0.1:$PORT --clients 4 --words 511 --seconds "$SECS" \
    --warmup 0 --out "$D/load-$t.json" > "$D/load-$t.log" 2>&1 &
  lpid=$!
  sleep 3
  if [[ $t == local ]]; then
    kill -USR1 $pid
  else
    child=$(pgrep -P $pid | head -1)
    echo "kill -9 replica process $child"
    kill -9 "$child"
  fi
  wait $lpid
  cat "$D/load-$t.log"
  grep -E "fault|rebuil|restart|exited" "$D/serve-$t.log" | cut -c1-240 | head -8
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print("errors:", r["errors"], r["first_errors"]); sys.exit(1 if r["errors"] else 0)' \
    "$D/load-$t.json" || rc=1
  kill -TERM $pid; wait $pid || true
done
exit $rc
