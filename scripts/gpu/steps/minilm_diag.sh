#!/usr/bin/env bash
# GPU step (issue 32, session 25): where MiniLM 1024 x 128 lost ~5.5% against 2ee956c (session
# 24: 89.5K against 94.7K emb/s). For this build and the base (.gpu_probe/base/petal.xz):
#   1. `petal bench engine` throughput_1024x128 with graphs and with --no-graphs (MD_ROUNDS (2) rounds,
#      alternating builds), and this build with PETAL_ATTN_VARIANTS=0;
#   2. Nsight Compute kernel durations of one eager 16,384-token forward (the last one of the
#      run), summed per kernel family, side by side (scripts/gpu/ncu_families.py).
# If the kernel sums agree, the loss is between kernels (host or stream), not in them.
# Carry `.gpu_bundle`, `.gpu_probe` and models/all-MiniLM-L6-v2/tokenizer.json. ~3 min.
# Results: $OUT/minilm_diag/*.json, ncu-<build>.csv, families.md.
set -uo pipefail
D="$OUT/minilm_diag"
mkdir -p "$D"
[[ -x .gpu_probe/base/petal ]] || { xz -dk .gpu_probe/base/petal.xz && chmod +x .gpu_probe/base/petal; }
M=/tmp/petal-models/minilm-bidirectional
[[ -f $M/model.safetensors ]] || python3 scripts/gpu/make_minilm_shape.py $M \
  --tokenizer models/all-MiniLM-L6-v2/tokenizer.json >/dev/null || exit 1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
BINS=(new=.gpu_bundle/bin/petal base=.gpu_probe/base/petal)
ARGS=(--model $M --backend cuda --max-batch-tokens 32768 --max-batch-seqs 128)
rc=0
bench() {  # name bin tag [env...] -- extra flags
  local name=$1 bin=$2 tag=$3
  shift 3
  env "$@" "$bin" bench engine "${ARGS[@]}" --seconds 2 --scenarios throughput_1024x128 \
    ${EXTRA:-} --out "$D/$name-$tag.json" | grep -E 'throughput|check' | sed "s/^/$name $tag: /" || rc=1
}
for r in $(seq 1 "${MD_ROUNDS:-2}"); do
  for b in "${BINS[@]}"; do
    bench "${b%%=*}" "${b#*=}" graphs-r$r PETAL_X=0
    EXTRA=--no-graphs bench "${b%%=*}" "${b#*=}" nographs-r$r PETAL_X=0
  done
done
bench new .gpu_bundle/bin/petal novariants PETAL_ATTN_VARIANTS=0
if [[ -n "$NCU" ]]; then
  for b in "${BINS[@]}"; do
    name=${b%%=*} bin=${b#*=}
    timeout 110 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv \
      "$bin" bench engine "${ARGS[@]}" --no-graphs --no-check --seconds 0.1 --max-iters 2 \
      --scenarios throughput_1024x128 > "$D/ncu-$name.csv" 2> "$D/ncu-$name.err" ||
      { echo "ncu failed: $name"; tail -3 "$D/ncu-$name.err"; rc=1; }
  done
  python3 scripts/gpu/ncu_families.py --start BertEmbeddingKernel "$D/ncu-new.csv" "$D/ncu-base.csv" |
    tee "$D/families.md" || rc=1
else
  echo "ncu not found"; rc=1
fi
exit $rc
