#!/usr/bin/env bash
# GPU step (issue 22, `petal embed --gpus`): the same JSONL dataset embedded with one engine per
# GPU, on 1 GPU and then on every GPU of the machine (run it on a multi-GPU kind), the
# pplx-embed-v1-0.6b random-weight shape with the real Qwen3 tokenizer (carry
# models/tokenizers/qwen3). Checks that both outputs hold the same rows in the same order (cosine
# per row) and reports rows/s and the scaling. Knobs: BULK_GPUS_ROWS (default 200000), words per
# row BULK_GPUS_WORDS (default 128). Results: $OUT/bulk_gpus/summary.json.
set -uo pipefail
D="$OUT/bulk_gpus"
mkdir -p "$D"
M=/tmp/petal-models/0.6b-bidirectional-qwen3tok
[[ -f $M/model.safetensors ]] || petal make-model --shape pplx-embed-v1-0.6b --attention bidirectional \
  --tokenizer models/tokenizers/qwen3/tokenizer.json --out $M >/dev/null
N=$(nvidia-smi -L | wc -l)
W=/tmp/petal-bulk-gpus
rm -rf $W; mkdir -p $W
python3 - $W/rows.jsonl "${BULK_GPUS_ROWS:-200000}" "${BULK_GPUS_WORDS:-128}" <<'PY'
import json, random, sys
words = "the quick brown fox jumps over lazy dog and a time year people way day man thing world life hand part child eye woman place work week case point number group fact good new first last long great little own other old right big high small large next early young".split()
rng = random.Random(7)
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        f.write(json.dumps({"id": str(i), "text": " ".join(rng.choice(words) for _ in range(int(sys.argv[3])))}) + "\n")
PY
rc=0
declare -A SECS
for g in 1 $N; do
  t0=$(date +%s.%N)
  petal embed --model $M --input $W/rows.jsonl --output $W/out-$g.npy --gpus $g --no-progress \
    > "$D/embed-$g.log" 2>&1 || { rc=1; tail -5 "$D/embed-$g.log"; }
  t1=$(date +%s.%N)
  SECS[$g]=$(python3 -c "print($t1 - $t0)")
  tail -2 "$D/embed-$g.log"
done
python3 - "$D" "$W" "${BULK_GPUS_ROWS:-200000}" "$N" "${SECS[1]}" "${SECS[$N]}" <<'PY' || rc=1
import json, os, sys
import numpy as np
d, w, rows, n, s1, sn = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
a = np.load(os.path.join(w, "out-1.npy")).astype(np.float64)
b = np.load(os.path.join(w, f"out-{n}.npy")).astype(np.float64)
ok = a.shape == b.shape == (rows, a.shape[1])
cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)) if ok else np.zeros(1)
s = {"rows": rows, "gpus": n, "seconds_1gpu": s1, f"seconds_{n}gpu": sn,
     "rows_per_s_1gpu": rows / s1, f"rows_per_s_{n}gpu": rows / sn, "scaling": s1 / sn,
     "same_shape": bool(ok), "min_row_cosine_1_vs_n": float(cos.min())}
print(json.dumps(s, indent=1))
json.dump(s, open(os.path.join(d, "summary.json"), "w"), indent=1)
sys.exit(0 if ok and cos.min() > 0.999 else 1)
PY
exit $rc
