#!/usr/bin/env bash
# GPU step: ranking models (issue 17). `petal bench rerank` (1 query x 100 documents of 256 and
# 512 tokens: sequential p50/p99, pairs/s with 4 clients) on random-weight folders made by
# scripts/gpu/make_rerank_models.py: a MiniLM-L6 cross-encoder shape, the Qwen3-Reranker-0.6B
# shape and the same-shape Qwen3 embedder; beside them, in the same run on the same GPU, the
# Python baselines in bf16 (scripts/gpu/rerank_baseline.py: sentence-transformers CrossEncoder;
# the transformers recipe for Qwen3-Reranker). Needs models/tokenizers/qwen3 and the tokenizer
# files of models/all-MiniLM-L6-v2 (tokenizer.json, tokenizer_config.json, vocab.txt,
# special_tokens_map.json; not its 90 MB weights) carried. Results: $OUT/rerank/*.json and a summary on stdout.
# Targets (issue 17): Petal >= 3x the CrossEncoder's pairs/s; the Qwen3 reranker within 10% of
# the same-shape embedder's pairs/s.
set -uo pipefail
mkdir -p "$OUT/rerank"
M=/tmp/petal-rerank-models
SECS="${PETAL_BENCH_SECONDS:-4}"
rc=0
python3 scripts/gpu/make_rerank_models.py $M || { echo "could not make the model folders"; exit 1; }
B="--backend cuda --max-batch-tokens 32768 --max-batch-seqs 128 --seconds $SECS --docs 100 --lens 256,512 --clients 4"
for m in minilm-l6-ce qwen3-reranker-0.6b qwen3-embed-0.6b; do
  echo "== petal bench rerank $m"
  timeout 240 petal bench rerank --model $M/$m $B --out "$OUT/rerank/petal-$m.json" \
    > "$OUT/rerank/petal-$m.log" 2>&1 || { echo "petal $m failed"; tail -5 "$OUT/rerank/petal-$m.log"; rc=1; }
  grep -E "tokens:|error" "$OUT/rerank/petal-$m.log" || true
done
echo "== baselines (bf16)"
timeout 240 python3 scripts/gpu/rerank_baseline.py --model $M/minilm-l6-ce --kind crossencoder \
  --seconds $SECS --out "$OUT/rerank/st-minilm-l6-ce.json" || rc=1
timeout 240 python3 scripts/gpu/rerank_baseline.py --model $M/qwen3-reranker-0.6b --kind qwen3 \
  --seconds $SECS --out "$OUT/rerank/hf-qwen3-reranker-0.6b.json" || rc=1
python3 - "$OUT/rerank" <<'PY' || true
import json, os, sys
d = sys.argv[1]
def load(n):
    p = os.path.join(d, n)
    return json.load(open(p))["runs"] if os.path.exists(p) else {}
ce, st = load("petal-minilm-l6-ce.json"), load("st-minilm-l6-ce.json")
rr, em, hf = load("petal-qwen3-reranker-0.6b.json"), load("petal-qwen3-embed-0.6b.json"), load("hf-qwen3-reranker-0.6b.json")
summary = {}
for k in sorted(set(ce) | set(rr)):
    row = {}
    if k in ce and k in st:
        row["minilm_ce_vs_st"] = ce[k]["pairs_per_s"] / st[k]["pairs_per_s"]
    if k in rr and k in em:
        row["qwen3_reranker_vs_embedder"] = rr[k]["pairs_per_s"] / em[k]["pairs_per_s"]
    if k in rr and k in hf:
        row["qwen3_reranker_vs_hf"] = rr[k]["pairs_per_s"] / hf[k]["pairs_per_s"]
    summary[k] = row
    print(k, {a: round(b, 3) for a, b in row.items()})
json.dump(summary, open(os.path.join(d, "summary.json"), "w"), indent=1)
PY
exit $rc
