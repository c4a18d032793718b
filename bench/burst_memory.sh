#!/usr/bin/env bash
# Whether a burst of big requests leaves the serving process holding memory for good (issue 29's
# free lists are bounded: parsers, embed call records, row buffers; see docs/reliability.md). A
# `petal serve` with a ~0-cost FakeEngine, the MiniLM tokenizer and one local replica is warmed
# with 127-word requests; then BURSTS (default 2) times: BURST_CLIENTS clients each send BURST_REQS requests of
# BURST_TEXTS x BURST_WORDS words (bench/http_load.py), then 127-word requests again. The
# server's VmRSS / VmHWM is printed after each phase, with glibc's malloc_trim-free view
# (RssAnon) beside it.
# usage: bench/burst_memory.sh PETAL [MODEL]   (PORT default 18616)
set -uo pipefail
P=$1; MODEL=${2:-models/all-MiniLM-L6-v2}; PORT=${PORT:-18616}
BC=${BURST_CLIENTS:-8}; BR=${BURST_REQS:-4}; BT=${BURST_TEXTS:-100}; BW=${BURST_WORDS:-2000}
"$P" serve --model "$MODEL" --fake-engine --server-arg=--fake-vocab-size=30522 \
  --server-arg=--fake-hidden-size=384 --server-arg=--fake-hashed-rows --replica-transport local \
  --port $PORT > /tmp/burst_memory_serve.log 2>&1 &
SPID=$!
trap 'kill -INT $SPID 2>/dev/null; wait $SPID 2>/dev/null' EXIT
for _ in $(seq 1 100); do curl -sf -o /dev/null http://127.0.0.1:$PORT/health && break; sleep 0.2; done
mem() {
  printf '%-28s %s\n' "$1:" "$(grep -E '^(VmRSS|VmHWM|RssAnon)' /proc/$SPID/status | tr -s ' \t' ' ' |
    tr '\n' ' ')"
}
small() {
  "$P" bench http --gateway 127.0.0.1:$PORT --concurrency "$1" --words 127 --seconds "$2" \
    --warmup-seconds 0 | grep -E 'p50' | head -1
}
mem "started"
small 16 3
mem "after 127 words x 16 (3 s)"
for b in $(seq 1 "${BURSTS:-2}"); do
  python3 bench/http_load.py --url http://127.0.0.1:$PORT --clients $BC --texts $BT --words $BW \
    --requests $BR --seconds 0 --warmup 0 --timeout 600 | tail -1
  mem "after burst $b"
  small 16 5
  mem "after 127 words x 16 (5 s)"
done
small 1 5
mem "after 127 words x 1 (5 s)"
