#!/usr/bin/env bash
# Step `bench` of run_on_device.sh (runs on the GPU machine, cwd = repo root, $OUT set, bundle unpacked).
# Placeholder until the benchmark issues replace it: runs every Google Benchmark binary in the bundle
# (.gpu_bundle/bin/*bench*) and writes JSON results to $OUT/bench/<binary>.json.
set -euo pipefail
mkdir -p "$OUT/bench"
found=0
for b in .gpu_bundle/bin/*bench*; do
  [[ -x "$b" ]] || continue
  found=1
  name="$(basename "$b")"
  echo "== $name"
  # shellcheck disable=SC2086  # PETAL_BENCH_ARGS is a list of flags
  "$b" --benchmark_format=console --benchmark_out_format=json --benchmark_out="$OUT/bench/$name.json" \
    ${PETAL_BENCH_ARGS:-} 2>&1 | tail -n 30
done
((found)) || echo "no benchmark binaries in .gpu_bundle/bin yet (bundle.sh ships everything in <build>/bin)"
