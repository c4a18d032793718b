#!/usr/bin/env python3
"""Float64 numpy reference of BERT / XLM-R sequence classifiers and of a BERT SPLADE encoder, and
the goldens of their fixtures (tests/fixtures/classify/), independent of Petal's forward passes
(no torch needed).

Each fixture is its committed config.json (BertForSequenceClassification or
XLMRobertaForSequenceClassification, num_labels > 1), the real tokenizer.json it names, and seeded
random weights from scripts/gpu/golden_layouts.py's generator keyed by the tensor's bare name
(the values tests/layouts/layout_fixture.cc writes; the C++ tests check the per-tensor sums
recorded here). The tensor list is transformers' state dict of the class:
  BERT:  embeddings.*, encoder.layer.N.*, pooler.dense.{weight,bias}, classifier.{weight,bias}
  XLM-R: the same encoder (no pooler), classifier.dense.*, classifier.out_proj.*
The forward is the post-LN encoder with exact GELU (positions from pad_token_id + 1 on XLM-R),
then the head on the first token: BERT classifier(tanh(pooler.dense(h0))), XLM-R
out_proj(tanh(dense(h0))). Probabilities: softmax over the labels, or an independent sigmoid per
label when problem_type is multi_label_classification.

A fixture of "kind": "sparse" is a BertForMaskedLM (or XLMRobertaForMaskedLM) with a
sentence-transformers SpladePooling module: the same encoder, then transformers' cls.predictions
head (XLM-R: lm_head) on every token (dense, exact GELU, LayerNorm, the decoder tied to the word
embeddings, plus cls.predictions.bias / lm_head.bias), and the
vector is the max over the sequence's tokens of log(1 + relu(logits)) (SparseEncoder's
SpladePooling, max / relu). Its golden keeps, per text, the count of non-zero entries (and of those below 1e-5, which fp32
may round either way), their sum
and the 64 largest (index, value), not the 30522-wide vector.

Inputs: the manifest's texts one by one and its pairs as (a, b) through HF `tokenizers` with
truncation at max_length (longest_first). Token types are the tokenizer's, 0 everywhere when the
model has one type (XLM-R).

Run: .venv/bin/python scripts/ref/classify_numpy.py [--fixtures NAME ...] [--out DIR] [--model DIR]
Writes DIR/golden_<name>.json (default tests/fixtures/classify). With --model DIR it also checks
DIR/model.safetensors (a folder Petal built) against the generated weights, tensor by tensor.
"""
import argparse
import json
import math
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "gpu"))
from golden_layouts import ROOT, tensor_values  # noqa: E402  (the fixtures' weight generator)

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "classify")


def state_dict_shapes(cfg):
    """Bare tensor names and shapes of the class's transformers state dict (no position_ids)."""
    h, i = cfg["hidden_size"], cfg["intermediate_size"]
    labels = cfg.get("num_labels", len(cfg.get("id2label", {})) or 2)
    out = {"embeddings.word_embeddings.weight": (cfg["vocab_size"], h),
           "embeddings.position_embeddings.weight": (cfg["max_position_embeddings"], h),
           "embeddings.token_type_embeddings.weight": (cfg["type_vocab_size"], h),
           "embeddings.LayerNorm.weight": (h,), "embeddings.LayerNorm.bias": (h,)}
    for n in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{n}."
        for t in ("query", "key", "value"):
            out[p + f"attention.self.{t}.weight"] = (h, h)
            out[p + f"attention.self.{t}.bias"] = (h,)
        out[p + "attention.output.dense.weight"] = (h, h)
        out[p + "attention.output.dense.bias"] = (h,)
        out[p + "attention.output.LayerNorm.weight"] = (h,)
        out[p + "attention.output.LayerNorm.bias"] = (h,)
        out[p + "intermediate.dense.weight"] = (i, h)
        out[p + "intermediate.dense.bias"] = (i,)
        out[p + "output.dense.weight"] = (h, i)
        out[p + "output.dense.bias"] = (h,)
        out[p + "output.LayerNorm.weight"] = (h,)
        out[p + "output.LayerNorm.bias"] = (h,)
    if cfg["architectures"][0] == "BertForMaskedLM":  # tied decoder: not in the state dict
        out.update({"cls.predictions.transform.dense.weight": (h, h),
                    "cls.predictions.transform.dense.bias": (h,),
                    "cls.predictions.transform.LayerNorm.weight": (h,),
                    "cls.predictions.transform.LayerNorm.bias": (h,),
                    "cls.predictions.bias": (cfg["vocab_size"],)})
    elif cfg["architectures"][0] == "XLMRobertaForMaskedLM":  # lm_head.decoder tied, as above
        out.update({"lm_head.dense.weight": (h, h), "lm_head.dense.bias": (h,),
                    "lm_head.layer_norm.weight": (h,), "lm_head.layer_norm.bias": (h,),
                    "lm_head.bias": (cfg["vocab_size"],)})
    elif cfg["architectures"][0].startswith("XLMRoberta"):
        out.update({"classifier.dense.weight": (h, h), "classifier.dense.bias": (h,),
                    "classifier.out_proj.weight": (labels, h), "classifier.out_proj.bias": (labels,)})
    else:
        out.update({"pooler.dense.weight": (h, h), "pooler.dense.bias": (h,),
                    "classifier.weight": (labels, h), "classifier.bias": (labels,)})
    return out


def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


_erf = np.vectorize(math.erf)


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


class Classifier:
    def __init__(self, cfg, weights):
        self.cfg = cfg
        self.w = {k: v.astype(np.float64) for k, v in weights.items()}
        self.xlmr = cfg["architectures"][0].startswith("XLMRoberta")
        self.offset = cfg.get("pad_token_id", 1) + 1 if self.xlmr else 0
        self.eps = cfg.get("layer_norm_eps", 1e-5 if self.xlmr else 1e-12)

    def lin(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def splade(self, ids, types):
        """max over tokens of log(1 + relu(MLM logits)), [vocab]."""
        x = self.encode(ids, types)
        w = self.w
        if self.xlmr:  # XLMRobertaForMaskedLM's lm_head (RobertaLMHead)
            t = gelu(self.lin(x, "lm_head.dense"))
            t = layer_norm(t, w["lm_head.layer_norm.weight"], w["lm_head.layer_norm.bias"], self.eps)
            bias = w["lm_head.bias"]
        else:
            t = gelu(self.lin(x, "cls.predictions.transform.dense"))
            t = layer_norm(t, w["cls.predictions.transform.LayerNorm.weight"],
                           w["cls.predictions.transform.LayerNorm.bias"], self.eps)
            bias = w["cls.predictions.bias"]
        logits = t @ w["embeddings.word_embeddings.weight"].T + bias
        return np.log1p(np.maximum(logits, 0.0)).max(axis=0)

    def logits(self, ids, types):
        x = self.encode(ids, types)
        first = x[0]
        if self.xlmr:
            return self.lin(np.tanh(self.lin(first, "classifier.dense")), "classifier.out_proj")
        return self.lin(np.tanh(self.lin(first, "pooler.dense")), "classifier")

    def encode(self, ids, types):
        c, w, n = self.cfg, self.w, len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][self.offset:self.offset + n]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
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
                           w[p + "attention.output.LayerNorm.weight"],
                           w[p + "attention.output.LayerNorm.bias"], self.eps)
            h = gelu(self.lin(x, p + "intermediate.dense"))
            x = layer_norm(x + self.lin(h, p + "output.dense"), w[p + "output.LayerNorm.weight"],
                           w[p + "output.LayerNorm.bias"], self.eps)
        return x


def probabilities(logits, multi_label):
    if multi_label:
        return 1.0 / (1.0 + np.exp(-logits))
    e = np.exp(logits - logits.max())
    return e / e.sum()


def labels_of(cfg):
    n = cfg.get("num_labels", len(cfg.get("id2label", {})) or 2)
    names = cfg.get("id2label", {})
    return [names.get(str(i), f"LABEL_{i}") for i in range(n)]


def check_folder(folder, weights):
    from safetensors.numpy import load_file
    stored = load_file(os.path.join(folder, "model.safetensors"))
    bare = {k.split(".", 1)[1] if k.startswith(("bert.", "roberta.")) else k: v for k, v in stored.items()}
    assert set(bare) == set(weights), sorted(set(bare) ^ set(weights))
    for k, v in weights.items():
        assert bare[k].shape == v.shape and np.array_equal(bare[k], v), k
    print(f"{folder}: all {len(weights)} tensors equal the generated ones")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", nargs="*")
    ap.add_argument("--out", default=FIXTURES)
    ap.add_argument("--model", help="a folder Petal built: check its weights against these")
    args = ap.parse_args()
    from tokenizers import Tokenizer
    manifest = json.load(open(os.path.join(FIXTURES, "classify.json"), encoding="utf-8"))
    for fx in manifest["fixtures"]:
        if args.fixtures and fx["name"] not in args.fixtures:
            continue
        cfg = json.load(open(os.path.join(FIXTURES, fx["name"], "config.json")))
        weights = {name: tensor_values(manifest["seed"], name, shape, fx["weight_std"])
                   for name, shape in state_dict_shapes(cfg).items()}
        if args.model:
            check_folder(args.model, weights)
        model = Classifier(cfg, weights)
        tok = Tokenizer.from_file(os.path.join(ROOT, fx["tokenizer"], "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(max_length=fx["max_length"])
        multi = cfg.get("problem_type") == "multi_label_classification"
        sparse = fx.get("kind") == "sparse"
        cases = [{"text": t} for t in manifest["texts"]]
        if not sparse:
            cases += [{"pair": p} for p in manifest["pairs"]]
        for c in cases:
            enc = tok.encode(c["text"]) if "text" in c else tok.encode(c["pair"][0], c["pair"][1])
            types = enc.type_ids if cfg["type_vocab_size"] > 1 else [0] * len(enc.ids)
            if sparse:
                v = model.splade(np.array(enc.ids), np.array(types))
                top = np.argsort(-v, kind="stable")[:64]
                c.update({"ids": enc.ids, "type_ids": list(types), "logits": v[top].tolist(),
                          "probs": [], "top_index": top.tolist(), "nnz": int((v > 0).sum()),
                          "near_zero": int(((v > 0) & (v < 1e-5)).sum()),
                          "sum": float(v.sum())})
                continue
            logits = model.logits(np.array(enc.ids), np.array(types))
            c.update({"ids": enc.ids, "type_ids": list(types), "logits": logits.tolist(),
                      "probs": probabilities(logits, multi).tolist()})
        import tokenizers
        golden = {"fixture": fx["name"], "reference": "scripts/ref/classify_numpy.py (float64)",
                  "seed": manifest["seed"], "max_length": fx["max_length"],
                  "weight_std": fx["weight_std"], "labels": [] if sparse else labels_of(cfg),
                  "activation": "splade" if sparse else "sigmoid" if multi else "softmax",
                  "tensor_sums": {k: float(v.astype(np.float64).sum()) for k, v in sorted(weights.items())},
                  "generator": {"numpy": np.__version__, "tokenizers": tokenizers.__version__,
                                "python": sys.version.split()[0]},
                  "cases": cases}
        path = os.path.join(args.out, f"golden_{fx['name']}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(golden, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(f"{fx['name']}: lengths {[len(c['ids']) for c in cases]} -> {path}")
        for c in cases:
            print("  ", [round(x, 4) for x in (c["probs"] or c["logits"][:4])], c.get("nnz", ""))


if __name__ == "__main__":
    main()
