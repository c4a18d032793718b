#!/usr/bin/env bash
# GPU step: bulk embedding (issue 22), ~3-4 minutes. Results JSON in $OUT/bulk/.
# (a) Flow control: `petal serve` at default settings (pplx-embed-v1-0.6b random-weight shape, Qwen3
#     tokenizer), 4 HTTP clients each sending requests of 100 pre-tokenized texts x 4096 tokens:
#     error count and emb/s, against `petal bench engine` on the same shape (throughput_100x4096).
# (b) Datasets: a 1M-row Parquet file of 128-token texts (generated here; if this python3 has no
#     pyarrow, it is installed offline from a carried .gpu_wheels/pyarrow-*.whl, fetched on the
#     build machine with `pip download pyarrow==26.0.1 --only-binary=:all: --no-deps
#     --platform manylinux_2_28_x86_64 --python-version 3.X -d .gpu_wheels`; without either,
#     JSONL in and .npy out) embedded by
#     `petal embed --input` on all-MiniLM-L6-v2: rows/s against `petal bench engine`
#     (throughput_1024x128), and sentence-transformers `encode` in bf16 at its best batch size
#     on a 100k-row subset.
#     Also: the same command with --fake-engine (the host path alone), and the engine at 256-2048
#     rows of 128 tokens. Without the MiniLM weights (they do not fit in a carry beside the
#     bundle), random weights of its shape are made here from the carried small files.
# Knobs: BULK_REQUESTS (per client, default 4), BULK_ROWS (default 1000000), BULK_ST_ROWS (50000),
# BULK_SKIP_SERVE=1 skips (a).
set -uo pipefail
D="$OUT/bulk"
mkdir -p "$D"
W=/tmp/petal-bulk
mkdir -p $W
status=0

if [[ "${BULK_SKIP_SERVE:-0}" != 1 ]]; then
# ---- (a) 4 clients x 100 x 4096 against `petal serve` at default settings ----
M=/tmp/petal-models/0.6b-bidirectional-qwen3tok
[[ -f $M/model.safetensors ]] || petal make-model --shape pplx-embed-v1-0.6b --attention bidirectional \
  --tokenizer models/tokenizers/qwen3/tokenizer.json --out $M
PORT=18090
petal serve --model $M --backend cuda --port $PORT > "$D/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
python3 - "$PORT" "${BULK_REQUESTS:-4}" "$D/serve-4x100x4096.json" <<'PY' || status=1
import json, random, sys, threading, time, urllib.error, urllib.request
port, reqs, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
url = f"http://127.0.0.1:{port}"
for _ in range(480):
    try:
        urllib.request.urlopen(url + "/ready", timeout=5).read(); break
    except Exception:
        time.sleep(0.5)
def body(seed):
    r = random.Random(seed)
    return json.dumps({"input": [[r.randrange(1000, 100000) for _ in range(4096)] for _ in range(100)]}).encode()
bodies = [body(i) for i in range(4)]
# Warm-up (graph capture for this shape) before timing.
urllib.request.urlopen(urllib.request.Request(url + "/v1/embeddings", data=json.dumps(
    {"input": [[5] * 4096] * 8}).encode(), headers={"Content-Type": "application/json"}), timeout=600).read()
codes, rows = [], [0]
lock = threading.Lock()
def client(c):
    for i in range(reqs):
        req = urllib.request.Request(url + "/v1/embeddings", data=bodies[c],
                                     headers={"Content-Type": "application/json"})
        try:
            resp = json.loads(urllib.request.urlopen(req, timeout=600).read())
            code, n = 200, len(resp["data"])
        except urllib.error.HTTPError as e:
            code, n = e.code, 0
        except Exception:
            code, n = 0, 0
        with lock:
            codes.append(code); rows[0] += n
t0 = time.time()
ts = [threading.Thread(target=client, args=(c,)) for c in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
dt = time.time() - t0
res = {"clients": 4, "texts": 100, "tokens": 4096, "requests": len(codes),
       "errors": sum(c != 200 for c in codes), "codes": sorted(set(codes)),
       "seconds": dt, "emb_per_s": rows[0] / dt}
json.dump(res, open(out, "w"), indent=1)
print("serve 4x100x4096:", res)
PY
kill -TERM $pid; wait $pid 2>/dev/null || true
trap - EXIT
petal bench engine --model $M --backend cuda --scenarios throughput_100x4096 --seconds 5 \
  --out "$D/engine-100x4096.json" || status=1

fi

# ---- (b) 1M-row dataset on all-MiniLM-L6-v2 ----
MINI=""
for c in "${PETAL_MINILM:-}" .gpu_models/all-MiniLM-L6-v2 models/all-MiniLM-L6-v2; do
  [[ -n "$c" && -f "$c/model.safetensors" ]] && { MINI=$c; break; }
done
if [[ -z "$MINI" ]]; then
  # The weights (90 MB) do not fit in a call's carry beside the bundle: random weights of the
  # same shape from the carried small files (config, tokenizer, sentence-transformers files).
  # Speed does not depend on the values; fidelity is tested elsewhere.
  for c in .gpu_models/all-MiniLM-L6-v2-files models/all-MiniLM-L6-v2; do
    [[ -f "$c/config.json" && -f "$c/tokenizer.json" ]] && { SMALL=$c; break; }
  done
  [[ -n "${SMALL:-}" ]] || { echo "no all-MiniLM-L6-v2 files (carry .gpu_models/all-MiniLM-L6-v2-files)"; exit 1; }
  MINI=$W/minilm-random
  rm -rf $MINI && cp -r "$SMALL" $MINI && rm -f $MINI/model.safetensors
  python3 - "$MINI" <<'PY' || { echo "random MiniLM failed"; exit 1; }
import sys, torch
from transformers import BertConfig, BertModel
torch.manual_seed(0)
m = BertModel(BertConfig.from_pretrained(sys.argv[1]), add_pooling_layer=False)
m.save_pretrained(sys.argv[1], safe_serialization=True)
PY
  echo "random-weight all-MiniLM-L6-v2 shape in $MINI"
fi
PY=python3
if ! $PY -c 'import pyarrow' 2>/dev/null && ls .gpu_wheels/pyarrow-*.whl >/dev/null 2>&1; then
  $PY -m venv --system-site-packages $W/venv && $W/venv/bin/pip install -q --no-index \
    --find-links .gpu_wheels pyarrow && PY=$W/venv/bin/python
fi
export PETAL_PYTHON=$PY
EXT=jsonl OEXT=npy
$PY -c 'import pyarrow' 2>/dev/null && EXT=parquet OEXT=parquet
IN=$W/rows.$EXT
$PY - "$MINI" "$IN" "${BULK_ROWS:-1000000}" <<'PY' || status=1
# 10,000 distinct texts of 126 whole-word vocabulary entries (128 tokens with [CLS]/[SEP]),
# repeated to the row count; ids are the row numbers as strings.
import json, random, sys, time
mini, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
vocab = [w.strip() for w in open(mini + "/vocab.txt")]
words = [w for w in vocab[2000:] if w.isalpha() and w.isascii() and len(w) > 2]
r = random.Random(0)
texts = [" ".join(r.choice(words) for _ in range(126)) for _ in range(10000)]
t0 = time.time()
if path.endswith(".parquet"):
    import pyarrow as pa, pyarrow.parquet as pq
    ids = pa.array([str(i) for i in range(n)])
    col = pa.DictionaryArray.from_arrays(pa.array([i % 10000 for i in range(n)], pa.int32()),
                                         pa.array(texts)).cast(pa.string())
    pq.write_table(pa.table({"id": ids, "text": col}), path, row_group_size=65536)
else:
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": str(i), "text": texts[i % 10000]}) + "\n")
print(f"wrote {n} rows to {path} in {time.time() - t0:.1f} s")
PY
# `sync` after each removal: every run starts on a quiet disk (the previous run's output and
# parts written back and freed; the first real run after the fake one was 5-10% slower before).
rm -rf $W/out.npy* $W/out.parquet*; sync
# The host path alone (reading, tokenizing, writing) with an engine that computes nothing.
petal embed --model "$MINI" --fake-engine --input "$IN" --output $W/out.$OEXT --no-progress \
  > "$D/embed-fake.log" 2>&1 || { status=1; tail -5 "$D/embed-fake.log"; }
tail -1 "$D/embed-fake.log"
rm -rf $W/out.npy* $W/out.parquet*; sync
t0=$(date +%s.%N)
petal embed --model "$MINI" --backend cuda --input "$IN" --output $W/out.$OEXT \
  > "$D/embed.log" 2>&1 || { status=1; tail -5 "$D/embed.log"; }
t1=$(date +%s.%N)
tail -2 "$D/embed.log"
# Extra runs with other flags (BULK_VARIANTS="--threads 32;--batch-rows 2048"): embed-variant-N.log.
IFS=';' read -ra variants <<< "${BULK_VARIANTS:-}"
for i in "${!variants[@]}"; do
  rm -rf $W/out.npy* $W/out.parquet*; sync
  # shellcheck disable=SC2086
  petal embed --model "$MINI" --backend cuda --input "$IN" --output $W/out.$OEXT --no-progress \
    ${variants[$i]} > "$D/embed-variant-$i.log" 2>&1 || status=1
  echo "variant '${variants[$i]}':"; tail -2 "$D/embed-variant-$i.log"
done
$PY -c 'import pyarrow.parquet as pq, sys; f = pq.ParquetFile(sys.argv[1]); print("output:", f.metadata.num_rows, "rows,", f.metadata.num_row_groups, "row groups")' $W/out.$OEXT 2>/dev/null || true
petal bench engine --model "$MINI" --backend cuda \
  --scenarios throughput_256x128,throughput_512x128,throughput_1024x128,throughput_2048x128 \
  --seconds 3 --out "$D/engine-minilm-1024x128.json" || status=1
$PY - "$MINI" "$IN" "${BULK_ST_ROWS:-50000}" "$D/st-encode.json" <<'PY' || echo "sentence-transformers baseline failed"
import json, sys, time
import torch
from sentence_transformers import SentenceTransformer
mini, path, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
if path.endswith(".parquet"):
    import pyarrow.parquet as pq
    texts = pq.read_table(path, columns=["text"]).slice(0, n).column("text").to_pylist()
else:
    texts = [json.loads(l)["text"] for _, l in zip(range(n), open(path))]
m = SentenceTransformer(mini, device="cuda", model_kwargs={"dtype": torch.bfloat16})
m.encode(texts[:2048], batch_size=256)
res = {}
for bs in (256, 512, 1024):
    torch.cuda.synchronize(); t0 = time.time()
    m.encode(texts, batch_size=bs, convert_to_numpy=True)
    torch.cuda.synchronize(); res[bs] = n / (time.time() - t0)
    print(f"sentence-transformers bf16 batch {bs}: {res[bs]:.0f} rows/s")
best = max(res, key=res.get)
json.dump({"rows": n, "rows_per_s": res, "best_batch": best, "best_rows_per_s": res[best]},
          open(out, "w"), indent=1)
PY
python3 - "$D" "$t0" "$t1" "${BULK_ROWS:-1000000}" "$EXT" <<'PY'
import json, os, sys
d, t0, t1, n, ext = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def load(f):
    try: return json.load(open(os.path.join(d, f)))
    except Exception: return None
s = {"serve": load("serve-4x100x4096.json")}
e = load("engine-100x4096.json")
if e and s["serve"]:
    eng = e["scenarios"]["throughput_100x4096"]["emb_per_s"]
    s["engine_100x4096_emb_per_s"] = eng
    s["serve_vs_engine"] = s["serve"]["emb_per_s"] / eng
embed_rate = n / (t1 - t0)
s["embed"] = {"rows": n, "input": ext, "output": "parquet" if ext == "parquet" else "npy", "seconds": t1 - t0, "rows_per_s": embed_rate,
              "note": "wall time of the whole command: start-up, reading, tokenizing, writing, merge"}
import re
def phases(log):
    try: text = open(os.path.join(d, log)).read()
    except OSError: return None
    m = re.search(r"in ([0-9.]+) s, ([0-9]+) rows/s \(start-up ([0-9.]+) s; embedding ([0-9]+) rows/s over ([0-9.]+) s; closing ([0-9.]+) s\)", text)
    return m and {"seconds": float(m[1]), "rows_per_s": float(m[2]), "startup_s": float(m[3]),
                  "embedding_rows_per_s": float(m[4]), "embedding_s": float(m[5]), "closing_s": float(m[6])}
s["embed"]["phases"] = phases("embed.log")
s["embed_fake_engine"] = phases("embed-fake.log")
em = load("engine-minilm-1024x128.json")
if em:
    eng = em["scenarios"]["throughput_1024x128"]["emb_per_s"]
    s["engine_minilm_1024x128_emb_per_s"] = eng
    s["embed_vs_engine"] = embed_rate / eng
    s["engine_minilm_emb_per_s"] = {k: v["emb_per_s"] for k, v in em["scenarios"].items()}
    if s["embed"]["phases"]:
        s["embedding_phase_vs_engine"] = s["embed"]["phases"]["embedding_rows_per_s"] / eng
st = load("st-encode.json")
if st:
    s["st_bf16_best"] = {"batch": st["best_batch"], "rows_per_s": st["best_rows_per_s"]}
    s["embed_vs_st"] = embed_rate / st["best_rows_per_s"]
json.dump(s, open(os.path.join(d, "summary.json"), "w"), indent=1)
print(json.dumps(s, indent=1))
PY
exit $status
