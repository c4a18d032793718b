#!/usr/bin/env bash
# Where the serving process's mallocs come from on the HTTP path (issue 29): a `petal serve` with a
# ~0-cost FakeEngine (--fake-hashed-rows), the MiniLM tokenizer and one local replica; 200 requests
# of 127 words from `petal bench http` while `perf record` samples every libc malloc with a DWARF
# call graph; then a table of mallocs per request by allocating function and its first two petal
# callers. Needs root and `perf probe -x /lib/x86_64-linux-gnu/libc.so.6 malloc` once.
# usage: bench/malloc_sites.sh PETAL [MODEL]
# Knobs: CONC clients (default 1), NREQ requests per client (default 1000; the count is divided by
# CONC * NREQ) and PORT (default 18615; a second server on a busy port would be measured as
# nothing). Sessions 19 and 20 (bench/results/2026-12-0{6,7}-*) measured with it.
set -uo pipefail
P=$1; MODEL=${2:-models/all-MiniLM-L6-v2}; PORT=${PORT:-18615}; N=200
"$P" serve --model "$MODEL" --fake-engine --server-arg=--fake-vocab-size=30522 \
  --server-arg=--fake-hidden-size=384 --server-arg=--fake-hashed-rows --replica-transport local \
  --port $PORT > /dev/null 2>&1 &
SPID=$!
for _ in $(seq 1 100); do curl -sf -o /dev/null http://127.0.0.1:$PORT/health && break; sleep 0.2; done
"$P" bench http --gateway 127.0.0.1:$PORT --concurrency ${CONC:-1} --words 127 --seconds 1 --warmup-seconds 1 > /dev/null 2>&1
# The exact count first (perf stat counts every probe hit; the DWARF samples below can be lost
# when perf's buffer fills, so their per-request figures are a lower bound, and their shares
# are what to read).
m=$(perf stat -x, -e probe_libc:malloc -p $SPID -- "$P" bench http --gateway 127.0.0.1:$PORT \
    --concurrency ${CONC:-1} --words 127 --seconds 10 --warmup-seconds 0 --max-iters ${NREQ:-1000} 2>&1 >/dev/null | grep malloc | cut -d, -f1)
echo "mallocs per request, counted ($(( ${CONC:-1} * ${NREQ:-1000} )) requests): $(awk -v m="$m" -v n=$(( ${CONC:-1} * ${NREQ:-1000} )) 'BEGIN{printf "%.1f", m/n}')"
perf record -q -m 1024 -e probe_libc:malloc --call-graph dwarf,8192 -o /tmp/malloc_sites.data -p $SPID -- \
  "$P" bench http --gateway 127.0.0.1:$PORT --concurrency ${CONC:-1} --words 127 --seconds 10 \
  --warmup-seconds 0 --max-iters $N > /dev/null 2>&1
kill -INT $SPID; wait $SPID 2>/dev/null
perf script -i /tmp/malloc_sites.data -F ip,sym 2>/dev/null | python3 -c '
import collections, re, sys
n = int(sys.argv[1]); c = collections.Counter(); total = 0
def short(s):
    for _ in range(8): s = re.sub(r"<[^<>]*>", "", s)
    return re.sub(r"\(.*", "", s)[:80]
for blk in sys.stdin.read().split("\n\n"):
    syms = [l.strip().split(" ", 1)[1] for l in blk.strip().split("\n") if " " in l.strip()]
    syms = [s for s in syms if "malloc" not in s and s != "operator new"]
    if not syms: continue
    total += 1
    c[(short(syms[0]), " <- ".join([short(s) for s in syms if "petal::" in s][:2]))] += 1
print("mallocs per request, sampled stacks: %.1f (%d requests)" % (total / n, n))
print("| per request | allocating function | first petal callers |\n|---|---|---|")
for (f, callers), v in c.most_common(40): print("| %.2f | %s | %s |" % (v / n, f, callers))
' $(( ${CONC:-1} * N ))
