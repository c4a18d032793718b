#!/usr/bin/env python3
"""Regenerates the inference-free SPLADE Router fixture (tests/fixtures/classify/bert-splade-router/)
and its golden (golden_bert-splade-router.json) with sentence-transformers' SparseEncoder itself
(torch, float32, CPU).

The model is Router.for_query_document: the "query" route a SparseStaticEmbedding (token presence x
a per-vocabulary weight, seeded random here, saved as query_0_SparseStaticEmbedding/model.safetensors
and committed, 122 KB), the "document" route the bert-splade fixture's MLMTransformer (the same
seeded weights splade_st_check.py writes; not committed: the C++ test builds that folder as for
bert-splade and copies it into document_0_MLMTransformer/) + SpladePooling. The committed folder
holds everything but the transformer's weights and tokenizer. max_seq_length and the query
tokenizer's model_max_length are the fixture's 48.

Golden per manifest text (classify.json "texts"): "query": SparseEncoder.encode_query's non-zero
indices (ascending) and values, also with max_active_dims=3 ("query_top3"); "doc": encode_document's
non-zero count, sum, and its 64 largest (top_index, values).

Run: /work/refvenv/bin/python scripts/ref/splade_router_golden.py   (needs models/all-MiniLM-L6-v2's
tokenizer files; by hand, not in CI).
"""
import json
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "gpu"))
from classify_numpy import FIXTURES  # noqa: E402
from splade_st_check import write_folder  # noqa: E402

NAME = "bert-splade-router"
KEEP = ("modules.json", "router_config.json", "config_sentence_transformers.json",
        "document_1_SpladePooling", "query_0_SparseStaticEmbedding")


def main():
    warnings.filterwarnings("ignore")
    import torch
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.models import (MLMTransformer, Router,
                                                              SparseStaticEmbedding, SpladePooling)
    manifest = json.load(open(os.path.join(FIXTURES, "classify.json")))
    fx = next(f for f in manifest["fixtures"] if f["name"] == "bert-splade")
    texts = manifest["texts"]
    out_dir = os.path.join(FIXTURES, NAME)
    with tempfile.TemporaryDirectory() as d:
        mlm = os.path.join(d, "mlm")
        os.makedirs(mlm)
        write_folder(fx, manifest, mlm)
        doc = MLMTransformer(mlm, max_seq_length=fx["max_length"])
        tok = doc.tokenizer
        tok.model_max_length = fx["max_length"]
        rng = np.random.default_rng(manifest["seed"] + 31)
        vocab = doc.auto_model.config.vocab_size
        w = rng.uniform(0.05, 3.0, vocab).astype(np.float32)
        w[rng.random(vocab) < 0.1] = 0.0  # some tokens weigh nothing: dropped from the vector
        query = SparseStaticEmbedding(tokenizer=tok, weight=torch.from_numpy(w), frozen=True)
        router = Router.for_query_document(query_modules=[query],
                                           document_modules=[doc, SpladePooling("max")])
        model = SparseEncoder(modules=[router], similarity_fn_name="dot", device="cpu")
        saved = os.path.join(d, "saved")
        model.save(saved)
        model = SparseEncoder(saved, device="cpu")  # what a user loads
        q = model.encode_query(texts, convert_to_tensor=True, convert_to_sparse_tensor=False)
        q3 = model.encode_query(texts, max_active_dims=3, convert_to_tensor=True,
                                convert_to_sparse_tensor=False)
        dv = model.encode_document(texts, convert_to_tensor=True, convert_to_sparse_tensor=False)
        cases = []
        for t, qv, q3v, dvv in zip(texts, q.numpy(), q3.numpy(), dv.numpy()):
            qi = np.nonzero(qv)[0]
            q3i = np.nonzero(q3v)[0]
            top = np.argsort(-dvv, kind="stable")[:64]
            cases.append({"text": t,
                          "query": {"indices": qi.tolist(), "values": qv[qi].tolist()},
                          "query_top3": {"indices": q3i.tolist(), "values": q3v[q3i].tolist()},
                          "doc": {"nnz": int((dvv > 0).sum()), "sum": float(dvv.sum()),
                                  "near_zero": int(((dvv > 0) & (dvv < 1e-5)).sum()),
                                  "top_index": top.tolist(), "values": dvv[top].tolist()}})
        if os.path.exists(out_dir):
            shutil.rmtree(out_dir)
        os.makedirs(out_dir)
        for f in KEEP:
            src = os.path.join(saved, f)
            if os.path.isdir(src):
                os.makedirs(os.path.join(out_dir, f))
                for g in os.listdir(src):
                    if g.endswith(".json") and g.startswith("tokenizer"):
                        continue  # the tokenizer is the document's (copied by the test)
                    shutil.copy(os.path.join(src, g), os.path.join(out_dir, f, g))
            else:
                shutil.copy(src, os.path.join(out_dir, f))
        cst = json.load(open(os.path.join(out_dir, "config_sentence_transformers.json")))
        cst.pop("__version__", None)
        json.dump(cst, open(os.path.join(out_dir, "config_sentence_transformers.json"), "w"),
                  indent=2)
    golden = {"about": "scripts/ref/splade_router_golden.py: SparseEncoder.encode_query / "
                       "encode_document on the Router fixture", "max_length": fx["max_length"],
              "cases": cases}
    json.dump(golden, open(os.path.join(FIXTURES, f"golden_{NAME}.json"), "w"), indent=1)
    print(f"{NAME}: {len(cases)} texts, query nnz {[len(c['query']['indices']) for c in cases]}, "
          f"doc nnz {[c['doc']['nnz'] for c in cases]}")


if __name__ == "__main__":
    main()
