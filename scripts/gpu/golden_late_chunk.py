#!/usr/bin/env python3
"""Golden for late chunking (POST /v1/contextualizedembeddings): HF transformers run once on each
document's joined sequence, then the mean of each chunk's own tokens' last hidden states,
L2-normalised. Independent of Petal's forward passes and of its span planner: the joined ids and
spans are built here from HF's tokenizer (each chunk tokenized without special tokens, the chunks
concatenated, the model's special tokens around the whole: [CLS] ... [SEP] for BERT; the tiny
Qwen3 fixtures have no tokenizer and run raw ids).

Also writes, per chunk, the cosine between its late-chunk vector and the model's ordinary
embedding of the chunk alone (sentence-transformers for MiniLM; the model's own pooling of the
chunk's ids alone for Qwen3): how much the document context moves a chunk's vector.

Models: models/all-MiniLM-L6-v2 (real weights, mean, normalised), tests/fixtures/qwen3-tiny-bidir
(bidirectional, mean) and tests/fixtures/qwen3-tiny-causal (causal; last-token pooling for whole
texts, but spans are mean-pooled, docs/api.md).

Run: /work/refvenv/bin/python scripts/gpu/golden_late_chunk.py [--device cpu|cuda --dtype ...]
Writes tests/fixtures/late_chunk/golden.json (fp32, CPU). With --check-dtype bfloat16 --device
cuda it prints HF's own bf16 cosine to the committed fp32 golden (for comparison with Petal).
"""
import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "fixtures", "late_chunk", "golden.json")

MINILM_DOCS = [
    ["Berlin is the capital and largest city of Germany.",
     "Its more than 3.85 million inhabitants make it the most populous city of the European Union.",
     "The city is also one of the states of Germany.",
     "It is surrounded by the state of Brandenburg."],
    ["The mitochondrion is an organelle found in most eukaryotic cells.",
     "It generates most of the chemical energy needed to power the cell's reactions.",
     "This energy is stored in a molecule called ATP.",
     "Mitochondria have their own DNA, inherited from the mother.",
     "Their number per cell varies widely by organism and tissue type.",
     "Red blood cells have none."],
    ["def add(a, b):", "    return a + b", "print(add(2, 3))  # 5"],
    ["A single chunk document about the weather: sunny, 24 degrees."],
]


def qwen_docs(seed, vocab):
    rng = np.random.default_rng(seed)
    docs = []
    for n_chunks, max_len in [(3, 20), (8, 40), (1, 60), (12, 30)]:
        docs.append([rng.integers(0, vocab, size=int(rng.integers(1, max_len + 1))).tolist()
                     for _ in range(n_chunks)])
    return docs


def l2(v):
    n = np.linalg.norm(v)
    return v / max(n, 1e-12)


def cos(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def late_vectors(model, ids, spans, bidirectional, device, dtype):
    import torch
    x = torch.tensor([ids], device=device)
    kwargs = {}
    if bidirectional:
        L = x.shape[1]
        kwargs["attention_mask"] = torch.ones(1, 1, L, L, dtype=torch.bool, device=device)
    with torch.no_grad():
        h = model(input_ids=x, **kwargs).last_hidden_state[0].float().cpu().numpy()
    return [l2(h[a:b].astype(np.float64).mean(axis=0)) for a, b in spans]


def join(chunks, prefix, suffix):
    ids, spans = list(prefix), []
    for c in chunks:
        spans.append([len(ids), len(ids) + len(c)])
        ids += c
    return ids + list(suffix), spans


def minilm_case(device, dtype):
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer
    folder = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModel.from_pretrained(folder).to(device=device, dtype=dtype).eval()
    st = SentenceTransformer(folder, device=device)
    docs = []
    for chunks in MINILM_DOCS:
        chunk_ids = [tok(c, add_special_tokens=False)["input_ids"] for c in chunks]
        ids, spans = join(chunk_ids, [tok.cls_token_id], [tok.sep_token_id])
        assert len(ids) <= 256, len(ids)
        vecs = late_vectors(model, ids, spans, False, device, dtype)
        alone = st.encode(chunks, convert_to_numpy=True, batch_size=1)
        docs.append({"chunks": chunks, "ids": ids, "spans": spans,
                     "vectors": [[float("%.7g" % x) for x in v] for v in vecs],
                     "alone_cosine": [round(cos(v, a), 6) for v, a in zip(vecs, alone)]})
    return {"name": "all-MiniLM-L6-v2", "folder": "models/all-MiniLM-L6-v2", "input": "texts",
            "documents": docs}


def qwen_case(name, bidirectional, device, dtype):
    import torch
    import transformers
    from safetensors.torch import load_file
    folder = os.path.join(ROOT, "tests", "fixtures", name)
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    keys = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
    model = transformers.Qwen3Model(transformers.Qwen3Config(**keys))
    missing, unexpected = model.load_state_dict(
        load_file(os.path.join(folder, "model.safetensors")), strict=False)
    assert not unexpected and all(k.endswith("position_ids") for k in missing), (missing, unexpected)
    model = model.to(device=device, dtype=dtype).eval()
    docs = []
    for chunks in qwen_docs(17 if bidirectional else 23, cfg["vocab_size"]):
        ids, spans = join(chunks, [], [])
        vecs = late_vectors(model, ids, spans, bidirectional, device, dtype)
        alone = []
        for c in chunks:
            v = late_vectors(model, c, [[0, len(c)]] if bidirectional else [[len(c) - 1, len(c)]],
                             bidirectional, device, dtype)[0]
            alone.append(v)
        docs.append({"chunk_ids": chunks, "ids": ids, "spans": spans,
                     "vectors": [[float("%.7g" % x) for x in v] for v in vecs],
                     "alone_cosine": [round(cos(v, a), 6) for v, a in zip(vecs, alone)]})
    return {"name": name, "folder": "tests/fixtures/" + name, "input": "ids", "documents": docs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--check-dtype", default="", help="e.g. bfloat16: compare HF at it to the golden")
    args = ap.parse_args()
    import torch
    import transformers
    import sentence_transformers
    if args.check_dtype:
        dtype = getattr(torch, args.check_dtype)
        with open(OUT) as f:
            golden = json.load(f)
        cases = [minilm_case(args.device, dtype), qwen_case("qwen3-tiny-bidir", True, args.device, dtype),
                 qwen_case("qwen3-tiny-causal", False, args.device, dtype)]
        for g, c in zip(golden["models"], cases):
            worst = min(cos(a, b) for gd, cd in zip(g["documents"], c["documents"])
                        for a, b in zip(gd["vectors"], cd["vectors"]))
            print(f"HF {args.check_dtype} on {args.device} vs golden, {g['name']}: worst cosine {worst:.6f}")
        return
    torch.manual_seed(0)
    models = [minilm_case(args.device, torch.float32),
              qwen_case("qwen3-tiny-bidir", True, args.device, torch.float32),
              qwen_case("qwen3-tiny-causal", False, args.device, torch.float32)]
    out = {
        "description": "Late-chunk golden: HF transformers on each joined document, mean of each "
                       "chunk's span of the last hidden states, L2-normalised (fp32, CPU); "
                       "alone_cosine = cosine to the chunk embedded alone. Made by "
                       "scripts/gpu/golden_late_chunk.py.",
        "generator": {"torch": torch.__version__, "transformers": transformers.__version__,
                      "sentence_transformers": sentence_transformers.__version__},
        "models": models,
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    for m in models:
        al = [c for d in m["documents"] for c in d["alone_cosine"]]
        print(f"{m['name']}: {len(al)} chunks; cosine(late chunk, chunk alone): "
              f"min {min(al):.4f} mean {np.mean(al):.4f} max {max(al):.4f}")


if __name__ == "__main__":
    sys.exit(main())
