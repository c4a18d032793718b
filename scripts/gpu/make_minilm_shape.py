#!/usr/bin/env python3
"""A random-weight model folder in the all-MiniLM-L6-v2 layout (BertModel, 6 layers, hidden 384,
12 heads, intermediate 1536, vocabulary 30522; mean pooling, L2 normalisation, 256 tokens), for
timing the CPU engine where the real checkpoint (90 MB) cannot be carried, e.g. the GPU machine's
own CPU in the step `local_path` (LP_BACKEND=cpu). Only numpy is needed; the tokenizer is copied
from --tokenizer (a tokenizer.json, e.g. models/all-MiniLM-L6-v2/tokenizer.json). With --base, the
BERT-base layout instead (hidden 768, 12 layers, 12 heads, intermediate 3072; e.g. bge-base,
e5-base), same vocabulary.

usage: make_minilm_shape.py OUT_DIR --tokenizer PATH/tokenizer.json [--seed 1] [--base]
"""
import argparse
import json
import os
import shutil
import struct

import numpy as np

H, LAYERS, HEADS, FFN, VOCAB, POSITIONS = 384, 6, 12, 1536, 30522, 512


def tensors(rng):
    def w(*shape):  # BERT's initializer range
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def ln(prefix):
        return {prefix + ".weight": (1 + 0.1 * rng.standard_normal(H)).astype(np.float32),
                prefix + ".bias": w(H)}

    t = {"embeddings.word_embeddings.weight": w(VOCAB, H),
         "embeddings.position_embeddings.weight": w(POSITIONS, H),
         "embeddings.token_type_embeddings.weight": w(2, H)}
    t.update(ln("embeddings.LayerNorm"))
    for i in range(LAYERS):
        p = "encoder.layer.%d." % i
        for name in ("query", "key", "value"):
            t[p + "attention.self.%s.weight" % name] = w(H, H)
            t[p + "attention.self.%s.bias" % name] = w(H)
        t[p + "attention.output.dense.weight"] = w(H, H)
        t[p + "attention.output.dense.bias"] = w(H)
        t.update(ln(p + "attention.output.LayerNorm"))
        t[p + "intermediate.dense.weight"] = w(FFN, H)
        t[p + "intermediate.dense.bias"] = w(FFN)
        t[p + "output.dense.weight"] = w(H, FFN)
        t[p + "output.dense.bias"] = w(H)
        t.update(ln(p + "output.LayerNorm"))
    return t


def write_safetensors(path, t):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for k in sorted(t):
        n = t[k].nbytes
        header[k] = {"dtype": "F32", "shape": list(t[k].shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for k in sorted(t):
            f.write(np.ascontiguousarray(t[k]).tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--base", action="store_true", help="the BERT-base layout")
    a = ap.parse_args()
    if a.base:
        global H, LAYERS, FFN
        H, LAYERS, FFN = 768, 12, 3072
    os.makedirs(os.path.join(a.out, "1_Pooling"), exist_ok=True)
    write_safetensors(os.path.join(a.out, "model.safetensors"), tensors(np.random.default_rng(a.seed)))
    shutil.copy(a.tokenizer, os.path.join(a.out, "tokenizer.json"))
    files = {
        "config.json": {"architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu",
                        "hidden_size": H, "intermediate_size": FFN, "layer_norm_eps": 1e-12,
                        "max_position_embeddings": POSITIONS, "num_attention_heads": HEADS,
                        "num_hidden_layers": LAYERS, "pad_token_id": 0,
                        "position_embedding_type": "absolute", "type_vocab_size": 2,
                        "vocab_size": VOCAB},
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
        "1_Pooling/config.json": {"word_embedding_dimension": H, "pooling_mode_cls_token": False,
                                  "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
                                  "pooling_mode_mean_sqrt_len_tokens": False},
        "sentence_bert_config.json": {"max_seq_length": 256, "do_lower_case": False},
    }
    for name, content in files.items():
        with open(os.path.join(a.out, name), "w") as f:
            json.dump(content, f, indent=1)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
