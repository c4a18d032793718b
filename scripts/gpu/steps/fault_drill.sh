#!/usr/bin/env bash
# GPU step (issue 29): one replica fault under load on the H200, with 0 requests lost.
#  1. `petal serve --replica-transport local --replicas 2` (two engines on the GPU, in the
#     gateway's process); 4 clients x 511 words for FD_SECONDS (default 8) through
#     bench/http_load.py; after 3 s, SIGUSR1: replica-0's next batch is an engine fault, its
#     chunks are retried on replica-1 and its engine is rebuilt (local_replica.h).
#  2. the same with `--replica-transport unix`, and `kill -9` of one replica process instead (the
#     supervisor restarts it).
# Every wait is bounded (a hang shows as a timeout in the log, not a stuck step). Prints the
# client's totals (errors must be 0) and the serve log's fault/restart lines.
# Results: $OUT/fault_drill/{load-*.json,drill.log}. ~1 min.
set -uo pipefail
# The health probe is the system curl, without the bundle's libraries (its libcurl breaks it).
D="$OUT/fault_drill"
mkdir -p "$D"
M=/tmp/petal-models/0.6b-bidirectional-qwen3tok
[[ -f $M/model.safetensors ]] || petal make-model --shape pplx-embed-v1-0.6b --attention bidirectional \
  --tokenizer models/tokenizers/qwen3/tokenizer.json --out $M >/dev/null
SECS="${FD_SECONDS:-8}"
PORT=18490
rc=0
for t in local unix; do
  echo "== $t: 2 replicas, 4 clients x 511 words for ${SECS}s, a fault after 3 s"
  log=/tmp/fd-serve-$t.log
  petal serve --model $M --backend cuda --port $PORT --replicas 2 --replica-transport $t \
    --shutdown-grace-ms 2000 > "$log" 2>&1 &
  pid=$!
  up=0
  for _ in $(seq 1 240); do env -u LD_LIBRARY_PATH curl -sf -o /dev/null http://127.0.0.1:$PORT/health && { up=1; break; }; sleep 0.25; done
  if ((up == 0)); then echo "serve ($t) did not start"; tail -5 "$log"; kill -9 $pid; rc=1; continue; fi
  timeout 30 python3 bench/http_load.py --url http://127.0.0.1:$PORT --clients 4 --words 511 --seconds 2 \
    --warmup 0 --timeout 20 > /dev/null 2>&1 || echo "warm-up load: exit $?"
  timeout $((SECS + 40)) python3 bench/http_load.py --url http://127.0.0.1:$PORT --clients 4 --words 511 \
    --seconds "$SECS" --warmup 0 --timeout 20 --out "$D/load-$t.json" > /tmp/fd-load-$t.log 2>&1 &
  lpid=$!
  sleep 3
  if [[ $t == local ]]; then
    kill -USR1 $pid
  else
    child=$(pgrep -P $pid | head -1)
    echo "kill -9 replica process $child"
    kill -9 "$child"
  fi
  wait $lpid || echo "load client: exit $? (124: it timed out)"
  cat /tmp/fd-load-$t.log
  grep -E "fault|rebuil|restart|exited" "$log" | cut -c1-240 | head -8
  if [[ -f "$D/load-$t.json" ]]; then
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print("requests:", r["n"], "errors:", r["errors"], r["first_errors"]); sys.exit(1 if r["errors"] else 0)' \
      "$D/load-$t.json" || rc=1
  else
    echo "no result file"; rc=1
  fi
  kill -TERM $pid
  for _ in $(seq 1 60); do kill -0 $pid 2>/dev/null || break; sleep 0.5; done
  kill -0 $pid 2>/dev/null && { echo "serve ($t) did not stop in 30 s: SIGKILL"; kill -9 $pid; }
  wait $pid 2>/dev/null
  tail -3 "$log"
done
exit $rc
