#!/usr/bin/env python3
"""Goldens for the ranking-model fixtures (tests/fixtures/rerank/), from sentence-transformers
CrossEncoder (BERT and XLM-R sequence classifiers) and HF transformers Qwen3ForCausalLM (the
Qwen3-Reranker recipe of its model card), independent of Petal's forward passes.

Each fixture folder is built as the C++ test builds it (tests/layouts/layout_fixture.cc with the
rerank fixtures directory): the committed config.json, the real tokenizer.json it names, and
seeded random weights from golden_layouts.py's generator keyed by the tensor's name without the
encoder prefix ("bert." / "roberta." / "model."), the names Petal's checkpoint tables use. Then
every (query, document) pair of rerank.json is scored one pair per call:
- "sentence-transformers-crossencoder": CrossEncoder(folder, max_length=M).predict([(q, d)],
  activation_fn=Identity) for the logit, and .predict([(q, d)]) for the score (its default
  activation); the ids and token types are the tokenizer's (q, d) pair with truncation=True and
  max_length=M (longest_first), which is what predict feeds the model; both are cross-checked
  against a direct AutoModelForSequenceClassification call on those ids.
- "hf-qwen3-causal-lm-yes-no": ids = prefix + tokenizer("<Instruct>: ...\\n<Query>: ...\\n
  <Document>: ...", truncation=True, max_length=M - len(prefix) - len(suffix)) + suffix; the
  logits of "yes" and "no" at the last position of Qwen3ForCausalLM; score = softmax([no, yes])[1].

Run: /work/refvenv/bin/python scripts/gpu/golden_rerank.py [--fixtures NAME ...] [--device cpu|cuda]
     [--dtype float32|bfloat16] [--out DIR]
Writes tests/fixtures/rerank/golden_<name>.json (with --dtype bfloat16: golden_<name>_bfloat16.json).
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from golden_layouts import ROOT, tensor_values  # noqa: E402  (same generator as the layouts)

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "rerank")
QWEN_PREFIX = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the "
               "Query and the Instruct provided. Note that the answer can only be \"yes\" or "
               "\"no\".<|im_end|>\n<|im_start|>user\n")
QWEN_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
QWEN_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"


def bare(name):
    for p in ("bert.", "roberta.", "model."):
        if name.startswith(p):
            return name[len(p):]
    return name


def hf_model(cfg):
    import transformers
    conf = transformers.AutoConfig.for_model(**cfg)
    if cfg["architectures"][0] == "Qwen3ForCausalLM":
        return transformers.Qwen3ForCausalLM(conf)
    return transformers.AutoModelForSequenceClassification.from_config(conf)


def build_folder(fx, seed, out):
    import torch
    from safetensors.torch import save_file
    shutil.copytree(os.path.join(FIXTURES, fx["name"]), out, dirs_exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if os.path.exists(os.path.join(ROOT, fx["tokenizer"], f)):
            shutil.copy(os.path.join(ROOT, fx["tokenizer"], f), os.path.join(out, f))
    with open(os.path.join(out, "config.json")) as f:
        cfg = json.load(f)
    model = hf_model(cfg)
    tied = cfg.get("tie_word_embeddings", False) and "lm_head.weight" in model.state_dict()
    tensors, sums, digest = {}, {}, hashlib.sha256()
    for name, p in model.state_dict().items():
        if name.endswith("position_ids") or (tied and name == "lm_head.weight"):
            continue
        tensors[name] = torch.from_numpy(tensor_values(seed, bare(name), tuple(p.shape),
                                                       fx.get("weight_std", 0.02))).contiguous()
    for name in sorted(tensors):
        v = tensors[name].numpy()
        digest.update(name.encode())
        digest.update(v.tobytes())
        sums[bare(name)] = float(v.astype(np.float64).sum())
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    return cfg, digest.hexdigest(), sums


def score_crossencoder(folder, fx, query, docs, device, dtype):
    import torch
    import transformers
    from sentence_transformers import CrossEncoder
    ce = CrossEncoder(folder, max_length=fx["max_length"], device=device, model_kwargs={"dtype": dtype})
    tok = ce.tokenizer
    direct = transformers.AutoModelForSequenceClassification.from_pretrained(folder, dtype=dtype).to(device).eval()
    rows = []
    for d in docs:
        logit = float(ce.predict([(query, d)], activation_fn=torch.nn.Identity(), convert_to_numpy=True)[0])
        score = float(ce.predict([(query, d)], convert_to_numpy=True)[0])
        enc = tok(query, d, truncation=True, max_length=fx["max_length"])
        ids = enc["input_ids"]
        # XLM-R's tokenizer returns no token types (the model has one type): all 0.
        types = enc.get("token_type_ids", [0] * len(ids))
        with torch.no_grad():
            x = direct(input_ids=torch.tensor([ids], device=device),
                       token_type_ids=torch.tensor([types], device=device)).logits[0, 0].float().item()
        assert abs(x - logit) <= 1e-5 * max(1.0, abs(x)), (x, logit)
        rows.append({"ids": ids, "type_ids": types, "logits": [logit], "score": score})
    return rows


def score_qwen3(folder, fx, query, docs, device, dtype):
    import torch
    import transformers
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=os.path.join(folder, "tokenizer.json"))
    model = transformers.Qwen3ForCausalLM.from_pretrained(folder, dtype=dtype).to(device).eval()
    yes, no = tok.convert_tokens_to_ids("yes"), tok.convert_tokens_to_ids("no")
    prefix = tok(QWEN_PREFIX, add_special_tokens=False)["input_ids"]
    suffix = tok(QWEN_SUFFIX, add_special_tokens=False)["input_ids"]
    rows = []
    for d in docs:
        middle = f"<Instruct>: {QWEN_INSTRUCTION}\n<Query>: {query}\n<Document>: {d}"
        ids = tok(middle, truncation="longest_first",
                  max_length=fx["max_length"] - len(prefix) - len(suffix))["input_ids"]
        ids = prefix + ids + suffix
        with torch.no_grad():
            last = model(input_ids=torch.tensor([ids], device=device)).logits[0, -1].float()
        pair = torch.stack([last[no], last[yes]])
        score = torch.nn.functional.log_softmax(pair, dim=0)[1].exp().item()
        rows.append({"ids": ids, "type_ids": [0] * len(ids),
                     "logits": [last[yes].item(), last[no].item()], "score": score})
    return rows, yes, no


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", nargs="*")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--out", default=FIXTURES)
    args = ap.parse_args()
    import safetensors
    import sentence_transformers
    import tokenizers
    import torch
    import transformers
    with open(os.path.join(FIXTURES, "rerank.json")) as f:
        manifest = json.load(f)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    for fx in manifest["fixtures"]:
        if args.fixtures and fx["name"] not in args.fixtures:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            # The folder name says "reranker" for the Qwen3 fixtures, as Petal's rule needs.
            folder = os.path.join(tmp, fx["name"])
            cfg, digest, sums = build_folder(fx, manifest["seed"], folder)
            extra = {}
            if fx["reference"] == "hf-qwen3-causal-lm-yes-no":
                rows, yes, no = score_qwen3(folder, fx, manifest["query"], manifest["documents"],
                                            args.device, dtype)
                extra = {"yes_token_id": yes, "no_token_id": no, "logits_order": ["yes", "no"]}
            else:
                rows = score_crossencoder(folder, fx, manifest["query"], manifest["documents"],
                                          args.device, dtype)
        golden = {"fixture": fx["name"], "reference": fx["reference"], "seed": manifest["seed"],
                  "max_length": fx["max_length"], "weight_std": fx.get("weight_std", 0.02),
                  "weights_sha256": digest, "tensor_sums": sums,
                  "dtype": args.dtype, "device": args.device, "query": manifest["query"], **extra,
                  "generator": {"torch": torch.__version__, "transformers": transformers.__version__,
                                "sentence_transformers": sentence_transformers.__version__,
                                "tokenizers": tokenizers.__version__,
                                "safetensors": safetensors.__version__, "numpy": np.__version__,
                                "python": sys.version.split()[0]},
                  "cases": [{"document": d, **r} for d, r in zip(manifest["documents"], rows)]}
        suffix = "" if args.dtype == "float32" else "_" + args.dtype
        path = os.path.join(args.out, f"golden_{fx['name']}{suffix}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(golden, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(f"{fx['name']}: lengths {[len(r['ids']) for r in rows]} "
              f"logits {[round(r['logits'][0], 5) for r in rows]} -> {path}")


if __name__ == "__main__":
    main()
