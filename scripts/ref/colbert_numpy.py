#!/usr/bin/env python3
"""Float64 numpy reference of ColBERT / PyLate multi-vector models, and the goldens of their
fixtures (tests/fixtures/colbert/), independent of Petal's forward passes and input shaping (no
torch needed).

Each fixture is a committed PyLate-layout folder (config.json of a BertModel, modules.json with a
Transformer and a Dense module, 1_Dense/config.json, config_sentence_transformers.json with
PyLate's keys), the real tokenizer.json it names, and seeded random weights from
scripts/gpu/golden_layouts.py's generator keyed by the tensor's bare name (the encoder: the
transformers BertModel state dict without the pooler, which ColBERT does not use; the Dense
module's linear.weight / linear.bias under the keys "1_Dense/linear.weight" / "1_Dense/linear.bias").

What PyLate does, written here from its documented behaviour (pylate.models.ColBERT):
  - prefixes: query_prefix / document_prefix are single tokens inserted right after the first
    token ([CLS]); the tokenizer truncates at length - 1 when a prefix is inserted (length =
    query_length or document_length), so a sequence is at most `length` tokens;
  - query expansion (do_query_expansion): queries are padded to query_length with the mask token;
    those positions have attention mask 0 (no token attends to them; they attend to the text)
    unless attend_to_expansion_tokens, and every query token (expansion included) keeps its vector;
  - documents keep the vectors of tokens not in the skiplist (skiplist_words through
    convert_tokens_to_ids, an unknown word mapping to [UNK]; default: string.punctuation);
  - the Dense module (identity activation) on every token, then each vector L2-normalised;
  - MaxSim(q, d) = sum over query vectors of the max dot product over d's vectors
    (colbert_scores_pairwise).
The encoder is the post-LN BERT with exact GELU; masked keys get -inf before the softmax (HF adds
the dtype's minimum, the same to float64 precision).

Run: .venv/bin/python scripts/ref/colbert_numpy.py [--fixtures NAME ...] [--out DIR]
Writes DIR/golden_<name>.json (default tests/fixtures/colbert).
"""
import argparse
import json
import math
import os
import string
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "gpu"))
from golden_layouts import ROOT, tensor_values  # noqa: E402  (the fixtures' weight generator)

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "colbert")


def encoder_shapes(cfg):
    h, i = cfg["hidden_size"], cfg["intermediate_size"]
    out = {"embeddings.word_embeddings.weight": (cfg["vocab_size"], h),
           "embeddings.position_embeddings.weight": (cfg["max_position_embeddings"], h),
           "embeddings.token_type_embeddings.weight": (cfg["type_vocab_size"], h),
           "embeddings.LayerNorm.weight": (h,), "embeddings.LayerNorm.bias": (h,)}
    for n in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{n}."
        for t in ("query", "key", "value"):
            out[p + f"attention.self.{t}.weight"] = (h, h)
            out[p + f"attention.self.{t}.bias"] = (h,)
        for name, shape in (("attention.output.dense.weight", (h, h)),
                            ("attention.output.dense.bias", (h,)),
                            ("attention.output.LayerNorm.weight", (h,)),
                            ("attention.output.LayerNorm.bias", (h,)),
                            ("intermediate.dense.weight", (i, h)), ("intermediate.dense.bias", (i,)),
                            ("output.dense.weight", (h, i)), ("output.dense.bias", (h,)),
                            ("output.LayerNorm.weight", (h,)), ("output.LayerNorm.bias", (h,))):
            out[p + name] = shape
    return out


def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


_erf = np.vectorize(math.erf)


def gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


class ColBert:
    def __init__(self, cfg, weights, dense):
        self.cfg = cfg
        self.w = {k: v.astype(np.float64) for k, v in weights.items()}
        self.dense = [(w.astype(np.float64), None if b is None else b.astype(np.float64))
                      for w, b in dense]
        self.eps = cfg.get("layer_norm_eps", 1e-12)

    def lin(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def encode(self, ids, attention):
        """Final hidden states [n, H]; keys with attention 0 are masked for every query."""
        c, w, n = self.cfg, self.w, len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][np.zeros(n, dtype=int)])
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        heads = c["num_attention_heads"]
        hd = c["hidden_size"] // heads
        key_bias = np.where(np.asarray(attention) > 0, 0.0, -np.inf)
        for l in range(c["num_hidden_layers"]):
            p = f"encoder.layer.{l}."
            q, k, v = (self.lin(x, p + "attention.self." + t).reshape(n, heads, hd).transpose(1, 0, 2)
                       for t in ("query", "key", "value"))
            s = q @ k.transpose(0, 2, 1) / math.sqrt(hd) + key_bias
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

    def token_vectors(self, ids, attention):
        x = self.encode(ids, attention)
        for wt, b in self.dense:
            x = x @ wt.T + (0.0 if b is None else b)
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def token_id(tok, word):
    """transformers' convert_tokens_to_ids on a fast tokenizer: the id, else [UNK]'s."""
    i = tok.token_to_id(word)
    return tok.token_to_id("[UNK]") if i is None else i


def shape_input(tok, st, text, is_query, mask_id):
    prefix = st.get("query_prefix" if is_query else "document_prefix")
    if prefix is None:
        prefix = "[Q] " if is_query else "[D] "
    length = st.get("query_length" if is_query else "document_length") or (32 if is_query else 180)
    expand = is_query and st.get("do_query_expansion", True)
    max_len = length - 1 if prefix else length
    tok.no_padding()
    tok.enable_truncation(max_length=max_len)
    ids = list(tok.encode(text).ids)
    attention = [1] * len(ids)
    if expand and len(ids) < max_len:
        pad = max_len - len(ids)
        ids += [mask_id] * pad
        attention += [0] * pad
    if prefix:
        ids.insert(1, tok.token_to_id(prefix))
        attention.insert(1, 1)
    if is_query and expand and st.get("attend_to_expansion_tokens", False):
        attention = [1] * len(ids)
    return ids, attention


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", nargs="*")
    ap.add_argument("--out", default=FIXTURES)
    args = ap.parse_args()
    from tokenizers import Tokenizer
    import tokenizers
    manifest = json.load(open(os.path.join(FIXTURES, "colbert.json"), encoding="utf-8"))
    for fx in manifest["fixtures"]:
        if args.fixtures and fx["name"] not in args.fixtures:
            continue
        folder = os.path.join(FIXTURES, fx["name"])
        cfg = json.load(open(os.path.join(folder, "config.json")))
        st = json.load(open(os.path.join(folder, "config_sentence_transformers.json")))
        modules = json.load(open(os.path.join(folder, "modules.json")))
        seed, std = manifest["seed"], fx["weight_std"]
        weights = {name: tensor_values(seed, name, shape, std)
                   for name, shape in encoder_shapes(cfg).items()}
        sums = {k: float(v.astype(np.float64).sum()) for k, v in weights.items()}
        dense = []
        for m in modules:
            if "Dense" not in m["type"]:
                continue
            dc = json.load(open(os.path.join(folder, m["path"], "config.json")))
            key = m["path"] + "/linear."
            wt = tensor_values(seed, key + "weight", (dc["out_features"], dc["in_features"]), std)
            b = tensor_values(seed, key + "bias", (dc["out_features"],), std) if dc.get("bias", True) else None
            sums[key + "weight"] = float(wt.astype(np.float64).sum())
            if b is not None:
                sums[key + "bias"] = float(b.astype(np.float64).sum())
            dense.append((wt, b))
        model = ColBert(cfg, weights, dense)
        tok = Tokenizer.from_file(os.path.join(ROOT, fx["tokenizer"], "tokenizer.json"))
        mask_id = tok.token_to_id("[MASK]")
        skip = {token_id(tok, w) for w in st.get("skiplist_words", list(string.punctuation))}
        queries, documents = [], []
        for text in manifest["queries"]:
            ids, att = shape_input(tok, st, text, True, mask_id)
            vec = model.token_vectors(np.array(ids), att)
            queries.append({"text": text, "ids": ids, "attention": att, "vectors": vec.tolist()})
        for text in manifest["documents"]:
            ids, att = shape_input(tok, st, text, False, mask_id)
            vec = model.token_vectors(np.array(ids), att)
            keep = [i not in skip for i in ids]
            documents.append({"text": text, "ids": ids, "keep": keep,
                              "vectors": vec[np.array(keep)].tolist()})
        maxsim = [[float((np.array(q["vectors"]) @ np.array(d["vectors"]).T).max(axis=1).sum())
                   for d in documents] for q in queries]
        golden = {"fixture": fx["name"], "reference": "scripts/ref/colbert_numpy.py (float64)",
                  "seed": seed, "weight_std": std, "skiplist_ids": sorted(skip),
                  "tensor_sums": dict(sorted(sums.items())),
                  "generator": {"numpy": np.__version__, "tokenizers": tokenizers.__version__,
                                "python": sys.version.split()[0]},
                  "queries": queries, "documents": documents, "maxsim": maxsim}
        path = os.path.join(args.out, f"golden_{fx['name']}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(golden, f, ensure_ascii=False)
            f.write("\n")
        print(f"{fx['name']}: queries {[len(q['ids']) for q in queries]}, documents "
              f"{[(len(d['ids']), sum(d['keep'])) for d in documents]} -> {path}")
        for row in maxsim:
            print("   maxsim", [round(x, 5) for x in row])


if __name__ == "__main__":
    main()
