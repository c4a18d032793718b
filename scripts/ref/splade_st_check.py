#!/usr/bin/env python3
"""Cross-check of the SPLADE fixtures' goldens (tests/fixtures/classify/golden_<name>.json, made by
classify_numpy.py in float64 numpy) against sentence-transformers' SparseEncoder itself (torch,
float32, CPU): the fixture's folder is written here (its committed config.json, modules.json and
1_SpladePooling/, the tokenizer it names, and model.safetensors with the same seeded weights under
the task class's names: "bert." / "roberta." encoder prefixes, the tied decoder left out), loaded
with SparseEncoder, and each manifest text encoded (also with max_active_dims=k). Checked per text:
the non-zero set is the golden's (count equal up to the golden's entries below 1e-5), the sum, the
64 largest within 1e-5, and with max_active_dims=k the k largest of the golden (k = 1, 16, 32).

Run: /work/refvenv/bin/python scripts/ref/splade_st_check.py [--fixtures bert-splade xlmr-splade]
Prints one line per fixture and exits non-zero on a mismatch. Needs torch, sentence-transformers,
safetensors and the tokenizer folders under models/ (by hand, not in CI).
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "gpu"))
from classify_numpy import FIXTURES, state_dict_shapes  # noqa: E402
from golden_layouts import ROOT, tensor_values  # noqa: E402


def write_folder(fx, manifest, dst):
    src = os.path.join(FIXTURES, fx["name"])
    for f in ("config.json", "modules.json"):
        shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    shutil.copytree(os.path.join(src, "1_SpladePooling"), os.path.join(dst, "1_SpladePooling"))
    tok = os.path.join(ROOT, fx["tokenizer"])
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        if os.path.exists(os.path.join(tok, f)):
            shutil.copy(os.path.join(tok, f), os.path.join(dst, f))
    cfg = json.load(open(os.path.join(src, "config.json")))
    xlmr = cfg["architectures"][0].startswith("XLMRoberta")
    if not os.path.exists(os.path.join(dst, "tokenizer_config.json")):
        tc = {"tokenizer_class": "XLMRobertaTokenizer" if xlmr else "BertTokenizer",
              "model_max_length": fx["max_length"]}
        if xlmr:
            tc.update({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                       "pad_token": "<pad>", "mask_token": "<mask>", "cls_token": "<s>",
                       "sep_token": "</s>"})
        json.dump(tc, open(os.path.join(dst, "tokenizer_config.json"), "w"))
    json.dump({"model_type": "SparseEncoder", "prompts": {}, "default_prompt_name": None,
               "similarity_fn_name": "dot"},
              open(os.path.join(dst, "config_sentence_transformers.json"), "w"))
    json.dump({"max_seq_length": fx["max_length"], "do_lower_case": False},
              open(os.path.join(dst, "sentence_bert_config.json"), "w"))
    import torch
    from safetensors.torch import save_file
    tensors = {}
    for name, shape in state_dict_shapes(cfg).items():
        v = torch.from_numpy(tensor_values(manifest["seed"], name, shape, fx["weight_std"]).astype(np.float32))
        head = name.startswith(("cls.", "lm_head."))
        tensors[name if head else ("roberta." if xlmr else "bert.") + name] = v.contiguous()
    save_file(tensors, os.path.join(dst, "model.safetensors"))


def check(fx, manifest):
    from sentence_transformers import SparseEncoder
    golden = json.load(open(os.path.join(FIXTURES, f"golden_{fx['name']}.json")))
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        write_folder(fx, manifest, d)
        model = SparseEncoder(d, device="cpu")
        model.max_seq_length = fx["max_length"]
        texts = [c["text"] for c in golden["cases"]]
        dense = model.encode(texts, convert_to_tensor=True, convert_to_sparse_tensor=False).numpy()
        worst = 0.0
        for c, v in zip(golden["cases"], dense):
            nnz = int((v > 0).sum())
            if abs(nnz - c["nnz"]) > c["near_zero"] or abs(v.sum() - c["sum"]) > 1e-5 * abs(c["sum"]):
                print(f"  {c['text'][:30]!r}: nnz {nnz} vs {c['nnz']}, sum {v.sum()} vs {c['sum']}")
                bad += 1
            err = np.abs(v[c["top_index"]] - np.array(c["logits"])).max()
            worst = max(worst, float(err))
            bad += err > 1e-5
        for k in (1, 16, 32):
            top = model.encode(texts, max_active_dims=k, convert_to_tensor=True,
                               convert_to_sparse_tensor=False).numpy()
            for c, v in zip(golden["cases"], top):
                got = set(np.nonzero(v > 0)[0].tolist())
                if got != set(c["top_index"][:k]):
                    print(f"  max_active_dims={k} {c['text'][:30]!r}: other entries")
                    bad += 1
        print(f"{fx['name']}: {len(texts)} texts, worst |top-64 value - golden| = {worst:.3g}, "
              f"{'OK' if bad == 0 else f'{bad} mismatches'}")
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", nargs="*", default=None)
    args = ap.parse_args()
    manifest = json.load(open(os.path.join(FIXTURES, "classify.json")))
    bad = 0
    for fx in manifest["fixtures"]:
        if fx.get("kind") != "sparse" or (args.fixtures and fx["name"] not in args.fixtures):
            continue
        bad += check(fx, manifest)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
