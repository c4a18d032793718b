#!/usr/bin/env bash
# usage: cpu_ab.sh CONC SECONDS ROUNDS: server CPU (utime+stime) per request, main (18750) vs new (18751)
# (bench/results/2026-12-07-http-allocs) Start the two servers first (see README.md).
C=$1; S=$2; R=$3
pid_of() { ss -ltnp | grep ":$1 " | sed 's/.*pid=\([0-9]*\).*/\1/'; }
ticks() { awk '{print $14+$15}' /proc/$1/stat; }
for r in $(seq 1 $R); do for p in 18750 18751; do
  pid=$(pid_of $p); t0=$(ticks $pid)
  out=$(${PETAL:-build/cpu/bin/petal} bench http --gateway 127.0.0.1:$p --concurrency $C --words 127 --seconds $S --warmup-seconds 0 2>&1 | grep "concurrency")
  t1=$(ticks $pid); n=$(echo "$out" | sed 's/.*(n=\([0-9]*\),.*/\1/')
  echo "$p c$C p50 $(echo $out | awk '{print $4}') req/s $(echo $out | awk '{print $12}') n=$n cpu_us_per_req=$(awk -v d=$((t1-t0)) -v n=$n 'BEGIN{printf "%.1f", d*10000/n}')"
done; done
