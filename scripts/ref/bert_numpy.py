#!/usr/bin/env python3
"""Float64 numpy reference of a BERT-family sentence embedder (no torch needed).

Reads a Hugging Face model folder (config.json, model.safetensors, sentence-transformers pooling
and normalize modules) and embeds inputs the way sentence-transformers does: word + position +
token-type embeddings, post-norm encoder layers with exact GELU, then mean or CLS pooling and
optional L2 normalisation (--gelu tanh: the tanh form instead, to measure what Petal's CUDA
default changes). It exists to check Petal's CPU engine independently of its code.

Usage:
  bert_numpy.py --model DIR [--texts FILE] [--gelu erf|tanh] < ids.jsonl > out.jsonl
stdin: JSON Lines, each a list of token ids; or with --texts FILE, JSON Lines of strings that
are tokenized with the folder's tokenizer.json (HF `tokenizers`), truncated to max_seq_length.
stdout: one object per input: {"text": ..., "ids": [...], "embedding": [...]}.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
from safetensors.numpy import load_file


def load_config(d):
    cfg = json.load(open(os.path.join(d, "config.json")))
    pooling, normalize, max_len = "cls", False, cfg["max_position_embeddings"]
    mods = os.path.join(d, "modules.json")
    if os.path.exists(mods):
        for m in json.load(open(mods)):
            if m["type"].endswith("Pooling"):
                p = json.load(open(os.path.join(d, m["path"], "config.json")))
                pooling = "mean" if p.get("pooling_mode_mean_tokens") else "cls"
            if m["type"].endswith("Normalize"):
                normalize = True
    sb = os.path.join(d, "sentence_bert_config.json")
    if os.path.exists(sb):
        max_len = min(json.load(open(sb)).get("max_seq_length", max_len), max_len)
    return cfg, pooling, normalize, max_len


def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


_erf = np.vectorize(math.erf)


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    """The tanh form (PyTorch's approximate="tanh"): what Petal's CUDA engine computes by default."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


class Bert:
    def __init__(self, d, act=gelu):
        self.act = act
        self.cfg, self.pooling, self.normalize, self.max_len = load_config(d)
        raw = load_file(os.path.join(d, "model.safetensors"))
        self.w = {}
        for k, v in raw.items():
            k = k[5:] if k.startswith("bert.") else k
            k = k.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
            self.w[k] = v.astype(np.float64)

    def lin(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def embed(self, ids):
        c, w = self.cfg, self.w
        eps = c.get("layer_norm_eps", 1e-12)
        n = len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        heads = c["num_attention_heads"]
        hd = c["hidden_size"] // heads
        for l in range(c["num_hidden_layers"]):
            p = f"encoder.layer.{l}."
            q, k, v = (self.lin(x, p + "attention.self." + t).reshape(n, heads, hd).transpose(1, 0, 2)
                       for t in ("query", "key", "value"))
            s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            ctx = (s @ v).transpose(1, 0, 2).reshape(n, heads * hd)
            x = layer_norm(x + self.lin(ctx, p + "attention.output.dense"),
                           w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps)
            h = self.act(self.lin(x, p + "intermediate.dense"))
            x = layer_norm(x + self.lin(h, p + "output.dense"),
                           w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
        e = x.mean(0) if self.pooling == "mean" else x[0]
        if self.normalize:
            e = e / max(np.linalg.norm(e), 1e-12)
        return e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--texts", help="JSON Lines of strings to tokenize instead of ids on stdin")
    ap.add_argument("--gelu", choices=("erf", "tanh"), default="erf",
                    help="the FFN's GELU: the checkpoints' exact form, or the tanh form")
    args = ap.parse_args()
    bert = Bert(args.model, gelu if args.gelu == "erf" else gelu_tanh)
    if args.texts:
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(os.path.join(args.model, "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(max_length=bert.max_len)
        texts = [json.loads(l) for l in open(args.texts) if l.strip()]
        inputs = [(t, tok.encode(t).ids) for t in texts]
    else:
        inputs = [(None, json.loads(l)) for l in sys.stdin if l.strip()]
    for text, ids in inputs:
        e = bert.embed(np.array(ids))
        rec = {"ids": list(map(int, ids)), "embedding": [float(v) for v in e]}
        if text is not None:
            rec = {"text": text, **rec}
        print(json.dumps(rec, ensure_ascii=False))


if __name__ == "__main__":
    main()
