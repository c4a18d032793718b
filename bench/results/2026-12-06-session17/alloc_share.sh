#!/usr/bin/env bash
# Where the serving process's cycles go on the HTTP path with a ~0-cost engine (FakeEngine with
# --fake-hashed-rows, MiniLM tokenizer, one local replica): mallocs per request (uprobe on libc
# malloc; needs `perf probe -x libc.so.6 malloc` once, as root), then `perf record` of the serving
# process at 1 and 16 clients x 127 words, summarised as kernel share and malloc/free share.
# usage: alloc_share.sh PETAL
set -uo pipefail
P=$1; PORT=18615; MODEL=${MODEL:-models/all-MiniLM-L6-v2}
"$P" serve --model "$MODEL" --fake-engine --server-arg=--fake-vocab-size=30522 \
  --server-arg=--fake-hidden-size=384 --server-arg=--fake-hashed-rows --replica-transport local \
  --port $PORT > /dev/null 2>&1 &
SPID=$!
for _ in $(seq 1 100); do curl -sf -o /dev/null http://127.0.0.1:$PORT/health && break; sleep 0.2; done
"$P" bench http --gateway 127.0.0.1:$PORT --concurrency 1 --words 127 --seconds 1 --warmup-seconds 1 > /dev/null 2>&1
m=$(perf stat -x, -e probe_libc:malloc -p $SPID -- "$P" bench http --gateway 127.0.0.1:$PORT \
    --concurrency 1 --words 127 --seconds 10 --warmup-seconds 0 --max-iters 1000 2>&1 >/dev/null | grep malloc | cut -d, -f1)
echo "mallocs per request (1,000 requests): $(awk -v m="$m" 'BEGIN{printf "%.1f", m/1000}')"
for c in 1 16; do
  perf record -o /tmp/alloc_share$c.data -F 4999 -p $SPID -- "$P" bench http --gateway 127.0.0.1:$PORT \
    --concurrency $c --words 127 --seconds 5 --warmup-seconds 1 2>&1 | grep -E "concurrency|p50"
  perf report -i /tmp/alloc_share$c.data --no-children --sort dso,symbol --stdio 2>/dev/null |
    python3 -c '
import re, sys
tot = kern = alloc = 0.0
for l in sys.stdin:
    m = re.match(r"\s+([\d.]+)%\s+(\S+)\s+\[(.)\]\s+(.*)", l)
    if not m: continue
    pct = float(m.group(1)); sym = m.group(4).strip(); tot += pct
    if m.group(3) == "k": kern += pct
    if re.search(r"(^|[^a-z])(malloc|_int_malloc|_int_free|cfree|free|tcache|malloc_consolidate|unlink_chunk|operator new|operator delete|_Znwm|_ZdlPv)", sym) and "futex" not in sym:
        alloc += pct
print(f"clients '$c': kernel {kern:.1f}% of the serving process cycles, malloc/free {alloc:.2f}%")'
done
kill -INT $SPID; wait $SPID 2>/dev/null
