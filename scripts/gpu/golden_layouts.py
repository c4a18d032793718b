#!/usr/bin/env python3
"""Goldens for the published config layouts (tests/fixtures/layouts/), from HF transformers /
sentence-transformers, independent of Petal's forward passes.

For each layout in tests/fixtures/layouts/layouts.json this script builds the model folder the
C++ test builds (tests/layouts/layout_fixture.cc): the committed config files, the real tokenizer files,
and seeded random weights (the generator of src/model/make_model.cc's SeededNormal, re-implemented
here in numpy with the same integer arithmetic, keyed by tensor name, so both sides write the same
values); then it embeds the manifest's texts one per call and writes
tests/fixtures/layouts/golden_<name>.json.

References:
- "sentence-transformers": SentenceTransformer(folder), fp32, CPU, encode(text, prompt_name=...).
- "hf-qwen3model-bidirectional-mean" (pplx-embed-v1, whose own modelling code comes through
  auto_map and is not run here): HF's Qwen3Model built from the same config keys, called with an
  all-True 4D boolean attention mask of shape [batch, 1, L, L] (in transformers 5.x that is used
  as the final mask, so every token attends to every token: bidirectional), then the mean of the
  last hidden state over the tokens (pplx's 1_Pooling is mean; no Normalize module).

Run: python3 scripts/gpu/golden_layouts.py [--layouts NAME ...] [--device cpu|cuda]
(needs torch, transformers, sentence-transformers, safetensors, numpy; e.g. /work/refvenv).
With --device cuda --dtype bfloat16 it also reports HF's own bf16 cosine to the fp32 golden.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LAYOUTS = os.path.join(ROOT, "tests", "fixtures", "layouts")
M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
CHUNK = 1 << 16


def fnv1a(key):
    h = 0xCBF29CE484222325
    for ch in key.encode():
        h = ((h ^ ch) * 0x100000001B3) & M64
    return h


def mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def seeded_normal(seed, key, mean, std, n):
    """make_model.cc SeededNormal: splitmix64 stream, Irwin-Hall of four 24-bit uniforms."""
    s0 = (seed ^ fnv1a(key)) & M64
    with np.errstate(over="ignore"):
        # Call k of SplitMix64 mixes s0 + k * golden; call 1 is discarded, then a, b alternate.
        k = np.arange(2, 2 * n + 2, dtype=np.uint64)
        z = mix(np.uint64(s0) + k * np.uint64(GOLDEN))
    a, b = z[0::2], z[1::2]
    m24 = np.uint64(0xFFFFFF)
    total = ((a >> np.uint64(40)) + ((a >> np.uint64(16)) & m24) + (b >> np.uint64(40)) +
             ((b >> np.uint64(16)) & m24)).astype(np.int64) - (1 << 25)
    scale = std * 1.7320508075688772 / float(1 << 24)
    return (mean + total.astype(np.float64) * scale).astype(np.float32)


def tensor_values(seed, name, shape, weight_std=0.02):
    """The values of checkpoint tensor `name` (its bare name, without "model."/"bert.");
    `weight_std` is the spread of the tensors that are not norm scales."""
    n = int(np.prod(shape)) if shape else 1
    is_norm = name.lower().endswith("norm.weight")
    mean, std = (1.0, 0.1) if is_norm else (0.0, weight_std)
    parts = [seeded_normal(seed, f"{name}#{c}", mean, std, min(CHUNK, n - c * CHUNK))
             for c in range((n + CHUNK - 1) // CHUNK)]
    return np.concatenate(parts).reshape(shape)


def copy_tokenizer(src_dir, dst, append_eos):
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if os.path.exists(os.path.join(ROOT, src_dir, f)):
            shutil.copy(os.path.join(ROOT, src_dir, f), os.path.join(dst, f))
    if append_eos:
        # Qwen3-Embedding's tokenizer.json: Qwen3's with a TemplateProcessing post-processor
        # appending the end-of-text token (what tests/layouts/layout_fixture.cc does too).
        path = os.path.join(dst, "tokenizer.json")
        with open(path, encoding="utf-8") as f:
            tok = json.load(f)
        eos_id = next(t["id"] for t in tok["added_tokens"] if t["content"] == append_eos)
        tok["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": append_eos, "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": append_eos, "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": append_eos, "type_id": 1}}],
            "special_tokens": {append_eos: {"id": append_eos, "ids": [eos_id],
                                            "tokens": [append_eos]}}}
        with open(path, "w", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False)


def hf_model_for(cfg):
    """An HF model class instance for the config (random init; weights are replaced)."""
    import transformers
    mt = cfg["model_type"]
    if mt == "bidirectional_pplx_qwen3":
        keys = {k: v for k, v in cfg.items()
                if k not in ("auto_map", "architectures", "model_type", "use_bidirectional_attention")}
        return transformers.Qwen3Model(transformers.Qwen3Config(**keys))
    return transformers.AutoModel.from_config(transformers.AutoConfig.for_model(**cfg))


def build_folder(layout, seed, out):
    import torch
    from safetensors.torch import save_file
    src = os.path.join(LAYOUTS, layout["name"])
    shutil.copytree(src, out, dirs_exist_ok=True)
    copy_tokenizer(layout["tokenizer"], out, layout.get("append_eos"))
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    model = hf_model_for(cfg)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[layout["dtype"]]
    tensors, digest = {}, hashlib.sha256()
    for name, p in model.state_dict().items():
        if name.endswith("position_ids"):
            continue
        v = torch.from_numpy(tensor_values(seed, name, tuple(p.shape))).to(dtype)
        tensors[name] = v.contiguous()
    sums = {}
    for name in sorted(tensors):
        values = tensors[name].float().numpy()
        digest.update(name.encode())
        digest.update(values.tobytes())
        sums[name] = float(values.astype(np.float64).sum())
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    return cfg, digest.hexdigest(), sums


def embed_pplx(folder, cfg, texts, device, dtype):
    import torch
    import transformers
    from safetensors.torch import load_file
    # The tokenizer straight from tokenizer.json: AutoTokenizer would follow config.json's auto_map.
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(folder, "tokenizer.json"))
    model = hf_model_for(cfg)
    missing, unexpected = model.load_state_dict(load_file(os.path.join(folder, "model.safetensors")),
                                                strict=False)
    assert not unexpected and all(k.endswith("position_ids") for k in missing), (missing, unexpected)
    model = model.to(device=device, dtype=dtype).eval()
    out = []
    for t in texts:
        ids = tok(t["input"], add_special_tokens=True)["input_ids"]
        x = torch.tensor([ids], device=device)
        L = x.shape[1]
        mask = torch.ones(1, 1, L, L, dtype=torch.bool, device=device)  # bidirectional
        with torch.no_grad():
            h = model(input_ids=x, attention_mask=mask).last_hidden_state[0].float()
        out.append((ids, h.mean(dim=0).cpu().numpy()))
    return out


def embed_st(folder, texts, device, dtype):
    import torch
    from sentence_transformers import SentenceTransformer
    m = SentenceTransformer(folder, device=device, model_kwargs={"dtype": dtype})
    out = []
    for t in texts:
        feats = m.tokenize([t["input"]])
        ids = feats["input_ids"][0].tolist()
        with torch.no_grad():
            e = m.encode(t["text"], prompt_name=t.get("prompt_name"), convert_to_numpy=True,
                         normalize_embeddings=False)
        out.append((ids, np.asarray(e, dtype=np.float32)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layouts", nargs="*")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--out", default=LAYOUTS, help="where golden_<name>.json go")
    args = ap.parse_args()
    import sentence_transformers
    import safetensors
    import tokenizers
    import torch
    import transformers
    with open(os.path.join(LAYOUTS, "layouts.json")) as f:
        manifest = json.load(f)
    seed = manifest["seed"]
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    for layout in manifest["layouts"]:
        if args.layouts and layout["name"] not in args.layouts:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            folder = os.path.join(tmp, layout["name"])
            cfg, digest, sums = build_folder(layout, seed, folder)
            prompts = {}
            stp = os.path.join(folder, "config_sentence_transformers.json")
            if os.path.exists(stp):
                with open(stp) as f:
                    prompts = json.load(f).get("prompts") or {}
            texts = []
            for t in manifest["texts"]:
                name = t.get("prompt_name") if t.get("prompt_name") in prompts else None
                texts.append({"text": t["text"], "prompt_name": name,
                              "input": (prompts[name] if name else "") + t["text"]})
            if layout["reference"] == "hf-qwen3model-bidirectional-mean":
                rows = embed_pplx(folder, cfg, texts, args.device, dtype)
            else:
                rows = embed_st(folder, texts, args.device, dtype)
        cases = [{"text": t["text"], "prompt_name": t["prompt_name"], "input": t["input"],
                  "ids": ids, "embedding": [float(f"{v:.7g}") for v in e]}
                 for t, (ids, e) in zip(texts, rows)]
        golden = {
            "layout": layout["name"], "reference": layout["reference"], "seed": seed,
            "weights_sha256": digest, "checkpoint_dtype": layout["dtype"],
            # float64 sum of each tensor's values (as stored): the C++ fixture writer checks its
            # generator against these.
            "tensor_sums": sums,
            "dtype": args.dtype, "device": args.device, "encode": "one text per call",
            "generator": {"torch": torch.__version__, "transformers": transformers.__version__,
                          "sentence_transformers": sentence_transformers.__version__,
                          "tokenizers": tokenizers.__version__,
                          "safetensors": safetensors.__version__, "numpy": np.__version__,
                          "python": sys.version.split()[0]},
            "cases": cases}
        suffix = "" if args.dtype == "float32" else "_" + args.dtype
        path = os.path.join(args.out, f"golden_{layout['name']}{suffix}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(golden, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(f"{layout['name']}: {len(cases)} cases, ids {[len(c['ids']) for c in cases]} -> {path}")


if __name__ == "__main__":
    main()
