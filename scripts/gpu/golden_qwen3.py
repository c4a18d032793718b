#!/usr/bin/env python3
"""Golden Qwen3 embeddings from Hugging Face transformers (fp32) on the GPU machine.

Runs on the GPU machine with the repository copy as the working directory; writes into $OUT.

Tiny mode (default): for each committed fixture tests/fixtures/qwen3-tiny-{bidir,causal}, loads
it with transformers' Qwen3Model in fp32 (TF32 off), runs every sequence of
tests/fixtures/qwen3_tiny_inputs.json alone (batch 1, no padding) with an explicit 4D boolean mask
(all positions for bidirectional, lower-triangular for causal; additive fp32, see mask4d), pools (mean or last token, in fp64) and
L2-normalises as Petal does, and writes $OUT/golden_<fixture>.json. Copy those files into
tests/fixtures/ and qwen3_test checks Petal CPU against them (cosine >= 0.99999).

0.6b mode (--shape 0.6b --model-dir DIR [--make]): DIR is a checkpoint of
`petal make-model --shape pplx-embed-v1-0.6b --seed 0` (bf16, bidirectional); with --make this
script writes it first through the numpy port of make-model (byte-identical model.safetensors, so
the petal binary is not needed there). Random ids for a few sequences of 16..512 tokens are run the
same way and written, ids and the checkpoint's sha256 included, to $OUT/golden_qwen3-0.6b.json,
which qwen3_test reads through PETAL_QWEN3_LARGE_DIR=DIR PETAL_QWEN3_LARGE_GOLDEN=<that file>
(cosine >= 0.9999), on that machine or on any other that ran the same make-model command.

Self-checks that fail the run: no checkpoint tensor missing or unused, inv_freq from the config's
rope theta, the mask visibly in force (bidirectional: the first token's state depends on the last
token; causal: it does not, and the explicit mask equals transformers' own causal default).
Where the fp64 numpy reference (scripts/ref/qwen3_numpy.py) is at hand it is compared too.
"""
import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
import qwen3_numpy  # noqa: E402  (settings reader and fp64 reference, no torch)

TINY = ["qwen3-tiny-bidir", "qwen3-tiny-causal"]
LARGE_LENGTHS = [16, 77, 128, 300, 512]


def load_hf(model_dir, attn, device):
    from transformers import Qwen3Model
    kwargs = dict(attn_implementation=attn, output_loading_info=True)
    try:
        model, info = Qwen3Model.from_pretrained(model_dir, dtype=torch.float32, **kwargs)
    except TypeError:  # transformers 4.x spelling
        model, info = Qwen3Model.from_pretrained(model_dir, torch_dtype=torch.float32, **kwargs)
    bad = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    if bad:
        raise SystemExit(f"{model_dir}: checkpoint does not match Qwen3Model: {bad}")
    model = model.to(device).eval()
    for p in model.parameters():
        if p.dtype != torch.float32:
            raise SystemExit(f"{model_dir}: parameter in {p.dtype}, expected float32")
    return model


def check_rope(model, cfg):
    theta = cfg.get("rope_theta", (cfg.get("rope_parameters") or {}).get("rope_theta"))
    d = cfg["head_dim"]
    want = 1.0 / (theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    rotary = getattr(model, "rotary_emb", None)
    if rotary is None or not hasattr(rotary, "inv_freq"):
        print("warning: model.rotary_emb.inv_freq not found; rope theta not checked")
        return
    got = rotary.inv_freq.double().cpu().numpy()
    if not np.allclose(got, want, rtol=1e-6, atol=0):
        raise SystemExit(f"rotary inv_freq does not follow rope_theta={theta}: {got[:4]} vs {want[:4]}")


def mask4d(n, causal, device):
    """[1, 1, n, n] mask that transformers passes through unchanged. Additive fp32 (0 = attend,
    fp32 min = masked) rather than boolean: eager attention adds the mask to the scores, and a
    boolean True would add 1 (harmless when all True, wrong for a causal mask); SDPA reads both."""
    allowed = torch.ones(n, n, dtype=torch.bool, device=device)
    if causal:
        allowed = torch.tril(allowed)
    m = torch.zeros(1, 1, n, n, dtype=torch.float32, device=device)
    return m.masked_fill(~allowed, torch.finfo(torch.float32).min)


@torch.no_grad()
def hidden(model, ids, causal, device):
    x = torch.tensor([ids], dtype=torch.long, device=device)
    out = model(input_ids=x, attention_mask=mask4d(len(ids), causal, device), use_cache=False)
    return out.last_hidden_state[0].double().cpu().numpy()


def pool(h, pooling, normalize):
    e = {"mean": lambda: h.mean(axis=0), "last_token": lambda: h[-1], "cls": lambda: h[0]}[pooling]()
    if normalize:
        e = e / max(np.linalg.norm(e), 1e-12)
    return e


@torch.no_grad()
def check_mask(model, causal, vocab, device):
    ids = [(7 * i + 3) % vocab for i in range(12)]
    other = ids[:-1] + [(ids[-1] + 1) % vocab]
    d0 = np.abs(hidden(model, ids, causal, device)[0] - hidden(model, other, causal, device)[0]).max()
    if causal:
        if d0 > 1e-6:  # rows of a GEMM do not mix, so this is 0 up to kernel choice
            raise SystemExit(f"causal mask not in force: first token moved by {d0:g}")
        x = torch.tensor([ids], dtype=torch.long, device=device)
        default = model(input_ids=x, use_cache=False).last_hidden_state[0].double().cpu().numpy()
        diff = np.abs(default - hidden(model, ids, causal, device)).max()
        if diff > 1e-5:
            raise SystemExit(f"explicit causal mask differs from transformers' default by {diff:g}")
    elif d0 < 1e-4:
        raise SystemExit(f"bidirectional mask not in force: first token moved only {d0:g}")
    return float(d0)


def cosines(a, b):
    return [float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y))) for x, y in zip(a, b)]


def run(model_dir, name, seqs, attn, device, out_dir, with_numpy, include_ids):
    cfg, causal, pooling, normalize = qwen3_numpy.model_settings(model_dir)
    t0 = time.time()
    model = load_hf(model_dir, attn, device)
    check_rope(model, cfg)
    first_token_delta = check_mask(model, causal, cfg["vocab_size"], device)
    embs = [pool(hidden(model, s, causal, device), pooling, normalize) for s in seqs]
    doc = {"model": name, "source": f"transformers {__import__('transformers').__version__} Qwen3Model, "
                                    f"torch {torch.__version__}, fp32 (TF32 off), attn={attn}, "
                                    f"{torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}",
           "attention_mask": "causal" if causal else "bidirectional", "pooling": pooling,
           "normalize": normalize, "mask_check_first_token_delta": first_token_delta}
    if with_numpy:
        ref = qwen3_numpy.Qwen3Ref(model_dir)
        cos = cosines(embs, [ref.embed(s) for s in seqs])
        doc["min_cosine_vs_numpy_fp64"] = min(cos)
        print(f"{name}: HF fp32 vs numpy fp64 min cosine {min(cos):.12f}")
        if min(cos) < 0.99999:
            raise SystemExit(f"{name}: HF and the numpy reference disagree (min cosine {min(cos)})")
    if include_ids:
        h = hashlib.sha256()
        with open(os.path.join(model_dir, "model.safetensors"), "rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                h.update(block)
        doc["model_safetensors_sha256"] = h.hexdigest()
        doc["sequences"] = seqs
    doc["embeddings"] = [[float(f"{v:.9g}") for v in e] for e in embs]
    path = os.path.join(out_dir, f"golden_{name}.json")
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path}: {len(embs)} x {len(embs[0])} ({time.time() - t0:.1f} s)")
    del model
    torch.cuda.empty_cache() if device == "cuda" else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=["tiny", "0.6b"], default="tiny")
    ap.add_argument("--model-dir", help="0.6b mode: checkpoint made by petal make-model")
    ap.add_argument("--make", action="store_true",
                    help="0.6b mode: first write --model-dir (make-model's numpy port, seed 0, bf16)")
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager")
    ap.add_argument("--fixtures", default="tests/fixtures")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--seed", type=int, default=4242, help="0.6b mode: seed of the random ids")
    ap.add_argument("--numpy", action="store_true", help="0.6b mode: also run the fp64 numpy reference")
    a = ap.parse_args()
    # fp32 means fp32: no TF32 in matmuls or convolutions.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    os.makedirs(a.out, exist_ok=True)
    if a.shape == "tiny":
        with open(os.path.join(a.fixtures, "qwen3_tiny_inputs.json")) as f:
            seqs = json.load(f)["sequences"]
        for name in TINY:
            run(os.path.join(a.fixtures, name), name, seqs, a.attn, device, a.out, True, False)
    else:
        if not a.model_dir:
            ap.error("--shape 0.6b needs --model-dir")
        if a.make:
            t0 = time.time()
            qwen3_numpy.make_checkpoint("pplx-embed-v1-0.6b", a.model_dir, seed=0, dtype="bf16",
                                        attention="bidirectional")
            print(f"wrote {a.model_dir} ({time.time() - t0:.1f} s)")
        cfg = qwen3_numpy.model_settings(a.model_dir)[0]
        rng = np.random.default_rng(a.seed)
        seqs = [rng.integers(0, cfg["vocab_size"], size=n).tolist() for n in LARGE_LENGTHS]
        run(a.model_dir, "qwen3-0.6b", seqs, a.attn, device, a.out, a.numpy, True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
