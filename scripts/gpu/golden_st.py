#!/usr/bin/env python3
"""Golden reference embeddings from sentence-transformers, for Petal's model tests.

For each model folder and each text of tests/fixtures/golden_texts.jsonl this records
  - the token ids exactly as sentence-transformers feeds them to the model (its tokenizer, truncated
    at the pipeline's max_seq_length, [CLS] ... [SEP] included), and
  - the float32 sentence embedding as the model's own pipeline produces it (pooling, and
    normalisation only if modules.json has a Normalize module),
into golden_<model>.json (one case per line, floats with 7 significant digits, ~250 KB per model).

Each text is encoded alone (batch size 1, no padding), in float32, on the CPU by default so that the
result is deterministic and does not depend on GPU kernels; --device cuda is available. It needs
torch + sentence-transformers, which the GPU machine has; on a build machine use any venv that has
them (not .venv: scripts/setup.sh keeps that light).

  python3 scripts/gpu/golden_st.py --model models/all-MiniLM-L6-v2 --out tests/fixtures
  python3 scripts/gpu/golden_st.py --models-dir .gpu_models --out "$OUT/golden"   # every model folder
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent.parent


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fmt(values) -> str:
    return "[" + ",".join(f"{float(v):.7g}" for v in values) + "]"


def pipeline_facts(model_dir: Path) -> dict:
    modules = json.loads((model_dir / "modules.json").read_text())
    pooling, normalize = None, False
    for m in modules:
        t = m.get("type", "")
        if t.endswith("Pooling"):
            cfg = json.loads((model_dir / m.get("path", "") / "config.json").read_text())
            for key, mode in (("pooling_mode_cls_token", "cls"), ("pooling_mode_mean_tokens", "mean"),
                              ("pooling_mode_lasttoken", "lasttoken"), ("pooling_mode_max_tokens", "max")):
                if cfg.get(key):
                    pooling = mode
                    break
        elif t.endswith("Normalize"):
            normalize = True
    return {"pooling": pooling, "normalize": normalize}


def run_model(model_dir: Path, texts: list[dict], texts_sha: str, out_dir: Path, device: str) -> Path:
    import numpy as np
    import torch
    import sentence_transformers
    import tokenizers
    import transformers
    from sentence_transformers import SentenceTransformer

    t0 = time.time()
    name = model_dir.name
    model = SentenceTransformer(str(model_dir), device=device)
    model = model.float().eval()
    max_len = int(model.max_seq_length)
    tok = model.tokenizer

    cases = []
    singles = []
    with torch.inference_mode():
        for t in texts:
            text = t["text"]
            prep = getattr(model, "preprocess", None) or model.tokenize  # ST >= 6 renamed tokenize
            features = prep([text])
            ids = features["input_ids"][0].tolist()
            full = tok(text, add_special_tokens=True, truncation=False)["input_ids"]
            emb = model.encode([text], batch_size=1, convert_to_numpy=True, show_progress_bar=False)[0]
            emb = np.asarray(emb, dtype=np.float32)
            singles.append(emb)
            cases.append({"id": t["id"], "text": text, "n_tokens": len(ids),
                          "truncated": len(full) > len(ids), "ids": ids, "embedding": emb,
                          "norm": float(np.linalg.norm(emb.astype(np.float64)))})
        # Batched (padded) encoding of the same texts, for information: how far padding moves results.
        batched = model.encode([t["text"] for t in texts], batch_size=16, convert_to_numpy=True,
                               show_progress_bar=False)
    batch_diff = float(np.max(np.abs(np.asarray(batched, dtype=np.float32) - np.stack(singles))))

    facts = pipeline_facts(model_dir)
    header = {
        "model": name,
        "model_safetensors_sha256": sha256_file(model_dir / "model.safetensors"),
        "texts_file": "tests/fixtures/golden_texts.jsonl",
        "texts_sha256": texts_sha,
        "max_seq_length": max_len,
        "dim": int(cases[0]["embedding"].shape[0]),
        "pooling": facts["pooling"],
        "normalize": facts["normalize"],
        "dtype": "float32",
        "device": device,
        "encode": "one text per call (batch 1, no padding)",
        "batched_vs_single_max_abs_diff": batch_diff,
        "generator": {
            "script": "scripts/gpu/golden_st.py",
            "torch": torch.__version__, "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__, "tokenizers": tokenizers.__version__,
            "numpy": np.__version__, "python": platform.python_version(), "machine": platform.machine(),
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"golden_{name}.json"
    lines = []
    for c in cases:
        lines.append("{" + ",".join([
            f"\"id\":{json.dumps(c['id'])}",
            f"\"text\":{json.dumps(c['text'], ensure_ascii=False)}",
            f"\"n_tokens\":{c['n_tokens']}",
            f"\"truncated\":{json.dumps(c['truncated'])}",
            f"\"norm\":{c['norm']:.9g}",
            f"\"ids\":{json.dumps(c['ids'], separators=(',', ':'))}",
            f"\"embedding\":{fmt(c['embedding'])}",
        ]) + "}")
    body = json.dumps(header, indent=1, ensure_ascii=False)[:-2]  # drop the closing "\n}"
    out.write_text(body + ",\n \"cases\": [\n" + ",\n".join(lines) + "\n ]\n}\n", encoding="utf-8")
    json.loads(out.read_text(encoding="utf-8"))  # must parse back
    n_trunc = sum(c["truncated"] for c in cases)
    print(f"[golden] {name}: {len(cases)} texts ({n_trunc} truncated at {max_len}), dim {header['dim']}, "
          f"pooling {facts['pooling']}, normalize {facts['normalize']}, batched-vs-single max|d| "
          f"{batch_diff:.2e}, {out.stat().st_size // 1024} KB, {time.time() - t0:.1f}s -> {out}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", default=[], help="a model folder (repeatable)")
    ap.add_argument("--models-dir", help="use every subfolder that has modules.json")
    ap.add_argument("--texts", default=str(ROOT / "tests/fixtures/golden_texts.jsonl"))
    ap.add_argument("--out", required=True, help="output folder for golden_<model>.json")
    ap.add_argument("--device", default="cpu", help="cpu (default, deterministic) or cuda")
    args = ap.parse_args()

    dirs = [Path(m) for m in args.model]
    if args.models_dir:
        dirs += sorted(p for p in Path(args.models_dir).iterdir() if (p / "modules.json").is_file())
    if not dirs:
        print("[golden] no model folders given (--model DIR or --models-dir DIR)", file=sys.stderr)
        return 2
    texts_path = Path(args.texts)
    texts = [json.loads(line) for line in texts_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts_sha = sha256_file(texts_path)
    failed = 0
    for d in dirs:
        try:
            run_model(d, texts, texts_sha, Path(args.out), args.device)
        except Exception as err:  # report and go on with the next model
            print(f"[golden] {d}: FAILED: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
