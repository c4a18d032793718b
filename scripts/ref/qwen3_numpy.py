#!/usr/bin/env python3
"""fp64 numpy reference of the Qwen3 embedder forward pass, independent of Petal's C++ code.

Reads a Hugging Face-layout Qwen3 checkpoint (config.json, optional petal_config.json and
sentence-transformers pooling files, model.safetensors in F32/BF16/F16, with or without the
"model." prefix) with its own safetensors parser, runs every sequence alone (batch 1, no padding),
pools (mean or last token), L2-normalises, and writes JSON:
  {"model": ..., "source": "numpy-fp64", "attention_mask": ..., "pooling": ...,
   "embeddings": [[...], ...]}  (one row per input sequence, in input order)

Usage:
  qwen3_numpy.py MODEL_DIR --inputs tests/fixtures/qwen3_tiny_inputs.json --out ref.json
  qwen3_numpy.py --make-inputs tests/fixtures/qwen3_tiny_inputs.json   (writes the input batch)
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

# Lengths 1..300 mixed, short and long interleaved so a ragged batch packs them unevenly.
TINY_LENGTHS = [1, 300, 2, 3, 17, 64, 5, 128, 1, 255, 31, 200, 8, 100, 256, 13, 127, 7]


def make_inputs(path, vocab=1000, seed=2026):
    rng = np.random.default_rng(seed)
    seqs = [rng.integers(0, vocab, size=n).tolist() for n in TINY_LENGTHS]
    seqs[2] = [0, vocab - 1]  # the vocabulary's edges
    doc = {"description": "Random token ids for the qwen3-tiny fixtures: lengths 1..300, "
                          "written by scripts/ref/qwen3_numpy.py --make-inputs",
           "seed": seed, "vocab_size": vocab, "sequences": seqs}
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


def read_safetensors(path):
    """Returns {name: float64 array}; BF16/F16/F32 only."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        raw = data[base + b:base + e]
        if t["dtype"] == "F32":
            a = np.frombuffer(raw, dtype="<f4")
        elif t["dtype"] == "F16":
            a = np.frombuffer(raw, dtype="<f2")
        elif t["dtype"] == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{name}: unsupported dtype {t['dtype']}")
        out[name] = a.astype(np.float64).reshape(t["shape"])
    return out


def load_json(path, default=None):
    if not os.path.exists(path):
        return default
    with open(path) as f:
        return json.load(f)


def model_settings(model_dir):
    """(config, causal, pooling, normalize) with the same precedence Petal documents:
    config.json is_causal, then sentence-transformers files, then petal_config.json."""
    cfg = load_json(os.path.join(model_dir, "config.json"))
    causal = bool(cfg.get("is_causal", True))
    pooling = "last_token" if causal else "mean"
    normalize = True
    modules = load_json(os.path.join(model_dir, "modules.json"))
    if modules is not None:
        normalize = any("Normalize" in m.get("type", "") for m in modules)
        for m in modules:
            if "Pooling" in m.get("type", ""):
                p = load_json(os.path.join(model_dir, m["path"], "config.json"), {})
                if p.get("pooling_mode_mean_tokens"):
                    pooling = "mean"
                elif p.get("pooling_mode_lasttoken"):
                    pooling = "last_token"
                elif p.get("pooling_mode_cls_token"):
                    pooling = "cls"
    petal = load_json(os.path.join(model_dir, "petal_config.json"), {})
    if "attention_mask" in petal:
        causal = petal["attention_mask"] == "causal"
    pooling = petal.get("pooling", pooling)
    normalize = petal.get("normalize", normalize)
    return cfg, causal, pooling, normalize


class Qwen3Ref:
    def __init__(self, model_dir):
        self.cfg, self.causal, self.pooling, self.normalize = model_settings(model_dir)
        w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
        if "embed_tokens.weight" not in w and "model.embed_tokens.weight" in w:
            w = {k[len("model."):]: v for k, v in w.items() if k.startswith("model.")}
        self.w = w
        c = self.cfg
        self.hq = c["num_attention_heads"]
        self.hkv = c.get("num_key_value_heads", self.hq)
        self.d = c.get("head_dim", c["hidden_size"] // self.hq)
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.theta = c.get("rope_theta", (c.get("rope_parameters") or {}).get("rope_theta", 1e6))

    def rms(self, x, weight):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * weight

    def linear(self, x, name):
        y = x @ self.w[name + ".weight"].T
        if name + ".bias" in self.w:
            y = y + self.w[name + ".bias"]
        return y

    def hidden(self, ids):
        w, d, L = self.w, self.d, len(ids)
        x = w["embed_tokens.weight"][np.asarray(ids)]
        inv_freq = self.theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        ang = np.arange(L, dtype=np.float64)[:, None] * inv_freq[None, :]
        cos = np.cos(np.concatenate([ang, ang], axis=-1))[:, None, :]
        sin = np.sin(np.concatenate([ang, ang], axis=-1))[:, None, :]

        def rope(t):  # rotate-half convention: pairs (j, j + d/2)
            rot = np.concatenate([-t[..., d // 2:], t[..., :d // 2]], axis=-1)
            return t * cos + rot * sin

        layers = self.cfg["num_hidden_layers"]
        for l in range(layers):
            p = f"layers.{l}."
            h = self.rms(x, w[p + "input_layernorm.weight"])
            q = self.linear(h, p + "self_attn.q_proj").reshape(L, self.hq, d)
            k = self.linear(h, p + "self_attn.k_proj").reshape(L, self.hkv, d)
            v = self.linear(h, p + "self_attn.v_proj").reshape(L, self.hkv, d)
            q = rope(self.rms(q, w[p + "self_attn.q_norm.weight"]))
            k = rope(self.rms(k, w[p + "self_attn.k_norm.weight"]))
            group = self.hq // self.hkv
            k = np.repeat(k, group, axis=1)  # q head h reads kv head h // group
            v = np.repeat(v, group, axis=1)
            s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(d)
            if self.causal:
                s = np.where(np.tril(np.ones((L, L), dtype=bool))[None], s, -np.inf)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            o = np.einsum("hqk,khd->qhd", s, v).reshape(L, self.hq * d)
            x = x + self.linear(o, p + "self_attn.o_proj")
            h = self.rms(x, w[p + "post_attention_layernorm.weight"])
            g = self.linear(h, p + "mlp.gate_proj")
            u = self.linear(h, p + "mlp.up_proj")
            x = x + self.linear(g / (1.0 + np.exp(-g)) * u, p + "mlp.down_proj")
        return self.rms(x, w["norm.weight"])

    def embed(self, ids):
        h = self.hidden(ids)
        e = {"mean": lambda: h.mean(axis=0), "last_token": lambda: h[-1],
             "cls": lambda: h[0]}[self.pooling]()
        if self.normalize:
            e = e / max(np.linalg.norm(e), 1e-12)
        return e


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", nargs="?")
    ap.add_argument("--inputs")
    ap.add_argument("--out")
    ap.add_argument("--make-inputs", metavar="PATH")
    a = ap.parse_args()
    if a.make_inputs:
        make_inputs(a.make_inputs)
        return 0
    if not (a.model_dir and a.inputs and a.out):
        ap.error("MODEL_DIR, --inputs and --out are required")
    ref = Qwen3Ref(a.model_dir)
    seqs = load_json(a.inputs)["sequences"]
    embs = [ref.embed(s) for s in seqs]
    doc = {"model": os.path.basename(os.path.normpath(a.model_dir)), "source": "numpy-fp64",
           "attention_mask": "causal" if ref.causal else "bidirectional",
           "pooling": ref.pooling, "normalize": ref.normalize,
           "embeddings": [[float(f"{v:.9g}") for v in e] for e in embs]}
    with open(a.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {a.out}: {len(embs)} embeddings of dim {len(embs[0])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
