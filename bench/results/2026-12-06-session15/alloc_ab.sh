#!/usr/bin/env bash
# Allocations and latency on the serving path, FakeEngine (its default cost), MiniLM tokenizer,
# one local replica: mallocs in the serving process per request (uprobe on libc malloc; needs
# `perf probe -x libc.so.6 malloc` once, as root), then `petal bench http` at 1 and 16 clients,
# rounds interleaved between two builds.
# usage: alloc_ab.sh BASE_PETAL NEW_PETAL [ROUNDS]
set -uo pipefail
BASE=$1; NEW=$2; ROUNDS=${3:-3}
MODEL=${MODEL:-models/all-MiniLM-L6-v2}
PORT=18611
serve() {
  "$1" serve --model "$MODEL" --fake-engine --server-arg=--fake-vocab-size=30522 \
    --server-arg=--fake-hidden-size=384 --replica-transport local --port $PORT > /dev/null 2>&1 &
  SPID=$!
  for _ in $(seq 1 100); do curl -sf -o /dev/null http://127.0.0.1:$PORT/health && return; sleep 0.2; done
}
for r in $(seq 1 "$ROUNDS"); do
  for b in base new; do
    bin=$BASE; [[ $b == new ]] && bin=$NEW
    serve "$bin"
    "$bin" bench http --gateway 127.0.0.1:$PORT --concurrency 1 --words 127 --seconds 1 --warmup-seconds 1 > /dev/null 2>&1
    if ((r == 1)); then
      m=$(perf stat -x, -e probe_libc:malloc -p $SPID -- "$bin" bench http --gateway 127.0.0.1:$PORT \
          --concurrency 1 --words 127 --seconds 10 --warmup-seconds 0 --max-iters 1000 2>&1 >/dev/null | grep malloc | cut -d, -f1)
      echo "$b mallocs per request (1,000 requests): $(awk -v m="$m" 'BEGIN{printf "%.1f", m/1000}')"
    fi
    "$bin" bench http --gateway 127.0.0.1:$PORT --concurrency 1 16 --words 127 --seconds 4 \
      --warmup-seconds 1 2>&1 | grep -E "concurrency" | sed "s/^/$b round $r: /"
    kill -INT $SPID; wait $SPID 2>/dev/null
  done
done
