#!/usr/bin/env python3
"""Random-weight ranking-model folders for `petal bench rerank` on the GPU machine (issue 17):
  minilm-l6-ce/: BertForSequenceClassification in the shape of cross-encoder/ms-marco-MiniLM-L-6-v2
                 (6 layers, hidden 384, 12 heads, intermediate 1536, 1 label), HF's own random
                 init, bf16 safetensors, the all-MiniLM-L6-v2 WordPiece tokenizer (same vocabulary);
  qwen3-reranker-0.6b/: from `petal make-model --shape pplx-embed-v1-0.6b --attention causal`
                 (the Qwen3-0.6B shape), made a reranker the documented way: petal_config.json
                 "task": "score", tie_word_embeddings true (as Qwen3-Reranker-0.6B), the Qwen3
                 tokenizer (for the "yes"/"no" ids); qwen3-embed-0.6b/ is the same folder as an
                 embedder, for the same-shape comparison.
usage: make_rerank_models.py OUT_DIR   (needs torch, transformers; `petal` on PATH)
"""
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def minilm_ce(out):
    import torch
    import transformers
    if os.path.exists(os.path.join(out, "model.safetensors")):
        return
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                                  num_attention_heads=12, intermediate_size=1536,
                                  max_position_embeddings=512, type_vocab_size=2, num_labels=1,
                                  architectures=["BertForSequenceClassification"])
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(cfg).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    tok = os.path.join(ROOT, "models", "all-MiniLM-L6-v2")
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if os.path.exists(os.path.join(tok, f)):
            shutil.copy(os.path.join(tok, f), os.path.join(out, f))


def qwen3(out_base):
    emb = os.path.join(out_base, "qwen3-embed-0.6b")
    rr = os.path.join(out_base, "qwen3-reranker-0.6b")
    if not os.path.exists(os.path.join(emb, "model.safetensors")):
        subprocess.run(["petal", "make-model", "--shape", "pplx-embed-v1-0.6b", "--attention",
                        "causal", "--out", emb], check=True)
    if not os.path.exists(os.path.join(rr, "model.safetensors")):
        shutil.copytree(emb, rr, dirs_exist_ok=True)
        with open(os.path.join(rr, "config.json")) as f:
            cfg = json.load(f)
        cfg["tie_word_embeddings"] = True
        with open(os.path.join(rr, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        pc = os.path.join(rr, "petal_config.json")
        extra = json.load(open(pc)) if os.path.exists(pc) else {}
        extra["task"] = "score"
        with open(pc, "w") as f:
            json.dump(extra, f, indent=2)
        shutil.copy(os.path.join(ROOT, "models", "tokenizers", "qwen3", "tokenizer.json"),
                    os.path.join(rr, "tokenizer.json"))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    minilm_ce(os.path.join(out, "minilm-l6-ce"))
    qwen3(out)


if __name__ == "__main__":
    main()
