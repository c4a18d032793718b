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


# A numpy port of `petal make-model` (src/model/make_model.cc), for machines without the petal
# binary: the same shapes, tensor order, PRNG and safetensors bytes (model.safetensors is
# byte-identical; check with sha256sum), and equivalent config files.
SHAPES = {  # layers, hidden, q heads, kv heads, head_dim, mlp, vocab, max positions, theta, eps
    "pplx-embed-v1-0.6b": (28, 1024, 16, 8, 128, 3072, 151669, 32768, 1e6, 1e-6),
    "pplx-embed-v1-4b": (36, 2560, 32, 8, 128, 9728, 151669, 32768, 1e6, 1e-6),
    "qwen3-tiny": (2, 64, 4, 2, 32, 128, 1000, 512, 1e6, 1e-6),
    "qwen3-tiny-gqa3": (3, 48, 6, 2, 16, 96, 1000, 512, 1e4, 1e-6),
}
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_CHUNK = 1 << 16


def _mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _fnv1a(key):
    h = 0xCBF29CE484222325
    for ch in key.encode():
        h = ((h ^ ch) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def seeded_normal(seed, key, mean, std, n):
    """Same values as SeededNormal() in make_model.cc (splitmix64, Irwin-Hall of four 24-bit draws)."""
    s0 = np.uint64((seed ^ _fnv1a(key)) & 0xFFFFFFFFFFFFFFFF)
    i = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        a = _mix(s0 + _GOLDEN * (np.uint64(2) + np.uint64(2) * i))
        b = _mix(s0 + _GOLDEN * (np.uint64(3) + np.uint64(2) * i))
    m24 = np.uint64(0xFFFFFF)
    total = ((a >> np.uint64(40)) + ((a >> np.uint64(16)) & m24) + (b >> np.uint64(40)) +
             ((b >> np.uint64(16)) & m24)).astype(np.int64) - (1 << 25)
    k = std * 1.7320508075688772 / float(1 << 24)
    return (mean + total.astype(np.float64) * k).astype(np.float32)


def _to_bf16(x):
    bits = x.view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)).astype("<u2")


def checkpoint_tensors(shape):
    L, h, hq, hkv, d, inter, vocab = SHAPES[shape][:7]
    t = [("embed_tokens.weight", (vocab, h), "emb")]
    for l in range(L):
        p = f"layers.{l}."
        t += [(p + "input_layernorm.weight", (h,), "norm"),
              (p + "self_attn.q_proj.weight", (hq * d, h), "proj"),
              (p + "self_attn.k_proj.weight", (hkv * d, h), "proj"),
              (p + "self_attn.v_proj.weight", (hkv * d, h), "proj"),
              (p + "self_attn.o_proj.weight", (h, hq * d), "proj"),
              (p + "self_attn.q_norm.weight", (d,), "norm"),
              (p + "self_attn.k_norm.weight", (d,), "norm"),
              (p + "post_attention_layernorm.weight", (h,), "norm"),
              (p + "mlp.gate_proj.weight", (inter, h), "proj"),
              (p + "mlp.up_proj.weight", (inter, h), "proj"),
              (p + "mlp.down_proj.weight", (h, inter), "proj")]
    return t + [("norm.weight", (h,), "norm")]


def make_checkpoint(shape, out_dir, seed=0, dtype="bf16", attention="bidirectional"):
    """Writes the checkpoint `petal make-model --shape SHAPE --seed SEED --dtype DTYPE
    --attention ATTENTION --out OUT_DIR` writes (no attention bias, no tokenizer)."""
    L, h, hq, hkv, d, inter, vocab, maxpos, theta, eps = SHAPES[shape]
    causal = attention == "causal"
    pooling = "last_token" if causal else "mean"
    os.makedirs(os.path.join(out_dir, "1_Pooling"), exist_ok=True)
    torch_dtype = "float32" if dtype == "f32" else "bfloat16"
    cfg = {"architectures": ["Qwen3Model"], "model_type": "qwen3", "hidden_size": h,
           "intermediate_size": inter, "num_hidden_layers": L, "num_attention_heads": hq,
           "num_key_value_heads": hkv, "head_dim": d, "vocab_size": vocab,
           "max_position_embeddings": maxpos, "rms_norm_eps": eps, "rope_theta": theta,
           "rope_parameters": {"rope_type": "default", "rope_theta": theta}, "hidden_act": "silu",
           "attention_bias": False, "attention_dropout": 0.0, "initializer_range": 0.02,
           "tie_word_embeddings": False, "use_cache": False, "use_sliding_window": False,
           "sliding_window": None, "max_window_layers": L, "is_causal": causal,
           "torch_dtype": torch_dtype, "dtype": torch_dtype}
    files = {"config.json": cfg,
             "petal_config.json": {"attention_mask": attention, "pooling": pooling, "normalize": True},
             "modules.json": [
                 {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                 {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                 {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
             "1_Pooling/config.json": {
                 "word_embedding_dimension": h, "pooling_mode_cls_token": False,
                 "pooling_mode_mean_tokens": not causal, "pooling_mode_max_tokens": False,
                 "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
                 "pooling_mode_lasttoken": causal, "include_prompt": True},
             "sentence_bert_config.json": {"max_seq_length": maxpos, "do_lower_case": False}}
    for name, doc in files.items():
        with open(os.path.join(out_dir, name), "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    specs = checkpoint_tensors(shape)
    width = 4 if dtype == "f32" else 2
    header, offset = '{"__metadata__":{"format":"pt"}', 0
    for name, shp, _ in specs:
        nbytes = int(np.prod(shp)) * width
        header += (f',"{name}":{{"dtype":"{"F32" if dtype == "f32" else "BF16"}","shape":['
                   + ",".join(str(x) for x in shp) + f'],"data_offsets":[{offset},{offset + nbytes}]}}')
        offset += nbytes
    header += "}"
    header += " " * (-len(header) % 8)
    with open(os.path.join(out_dir, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header.encode())
        for name, shp, kind in specs:
            n = int(np.prod(shp))
            mean, std = (1.0, 0.1) if kind == "norm" else (0.0, 0.02)
            for c, begin in enumerate(range(0, n, _CHUNK)):
                v = seeded_normal(seed, f"{name}#{c}", mean, std, min(_CHUNK, n - begin))
                f.write(v.astype("<f4").tobytes() if dtype == "f32" else _to_bf16(v).tobytes())


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
    ap.add_argument("--make-checkpoint", metavar="SHAPE",
                    help="write MODEL_DIR like `petal make-model --shape SHAPE` (with --seed, --dtype, --attention)")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--attention", choices=["bidirectional", "causal"], default="bidirectional")
    ap.add_argument("--random-lengths", metavar="N,N,...",
                    help="instead of --inputs: random ids of these lengths (ids go into the output)")
    ap.add_argument("--seed", type=int, help="seed of --random-lengths (default 4242) or of "
                                             "--make-checkpoint's weights (default 0)")
    a = ap.parse_args()
    if a.make_inputs:
        make_inputs(a.make_inputs)
        return 0
    if a.make_checkpoint:
        if not a.model_dir:
            ap.error("--make-checkpoint needs MODEL_DIR")
        make_checkpoint(a.make_checkpoint, a.model_dir, a.seed or 0, a.dtype, a.attention)
        print(f"wrote {a.model_dir}")
        return 0
    if not (a.model_dir and (a.inputs or a.random_lengths) and a.out):
        ap.error("MODEL_DIR, --inputs (or --random-lengths) and --out are required")
    ref = Qwen3Ref(a.model_dir)
    if a.random_lengths:
        rng = np.random.default_rng(4242 if a.seed is None else a.seed)
        seqs = [rng.integers(0, ref.cfg["vocab_size"], size=int(n)).tolist()
                for n in a.random_lengths.split(",")]
    else:
        seqs = load_json(a.inputs)["sequences"]
    embs = [ref.embed(s) for s in seqs]
    doc = {"model": os.path.basename(os.path.normpath(a.model_dir)), "source": "numpy-fp64",
           "attention_mask": "causal" if ref.causal else "bidirectional",
           "pooling": ref.pooling, "normalize": ref.normalize,
           "embeddings": [[float(f"{v:.9g}") for v in e] for e in embs]}
    if a.random_lengths:
        doc["sequences"] = seqs
    with open(a.out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {a.out}: {len(embs)} embeddings of dim {len(embs[0])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
