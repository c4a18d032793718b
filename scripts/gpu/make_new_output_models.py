#!/usr/bin/env python3
"""Random-weight model folders for the GPU step `new_outputs` (issue 31), in the BERT-base shape
(12 layers, hidden 768, 12 heads, intermediate 3072, 512 positions, vocabulary 30522) with the
all-MiniLM-L6-v2 WordPiece tokenizer (the bert-base-uncased vocabulary), bf16 safetensors:
  splade/      BertForMaskedLM (decoder tied to the word embeddings) + sentence-transformers
               SparseEncoder modules (MLMTransformer, SpladePooling max / relu), max_seq_length
               256. Random weights give ~half the vocabulary non-zero per text; a trained SPLADE
               model gives a few hundred, so cls.predictions.bias is lowered by one constant,
               measured here, that leaves about --nnz non-zeros per 256-token text (the answers'
               size then matches real use; the maths is unchanged).
  classifier/  BertForSequenceClassification, 3 labels (negative / neutral / positive), softmax.
  colbert/     BertModel + a PyLate Dense projection 768 -> 128 without bias, [unused0] / [unused1]
               prefixes, query_length 32, document_length 256, query expansion on.
--tiny makes the same folders with 2 layers, hidden 64, 2 heads (a CPU dry run).
usage: make_new_output_models.py OUT_DIR [--tiny] [--device cuda|cpu] [--nnz 200]
       [--tokenizer models/all-MiniLM-L6-v2]   (needs torch, transformers, safetensors)
"""
import argparse
import json
import os
import random
import shutil

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")


def bert_config(tiny, **kw):
    import transformers
    shape = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128) \
        if tiny else dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                          intermediate_size=3072)
    return transformers.BertConfig(vocab_size=30522, max_position_embeddings=512, type_vocab_size=2,
                                   **shape, **kw)


def copy_tokenizer(src, out):
    for f in TOKENIZER_FILES:
        if os.path.exists(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), os.path.join(out, f))


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)


def sample_texts(tokenizer, n, words, seed):
    """n texts of `words` single-token vocabulary words each (words + [CLS] + [SEP] tokens)."""
    vocab = [w for w, _ in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
             if w.isalpha() and w.isascii() and len(w) >= 3]
    rng = random.Random(seed)
    return [" ".join(rng.choice(vocab) for _ in range(words)) for _ in range(n)]


def splade(out, tiny, device, nnz, tok_dir):
    import torch
    import transformers
    if os.path.exists(os.path.join(out, "model.safetensors")):
        return
    torch.manual_seed(31)
    model = transformers.BertForMaskedLM(bert_config(tiny, architectures=["BertForMaskedLM"]))
    model = model.to(device).eval()
    tok = transformers.AutoTokenizer.from_pretrained(tok_dir)
    texts = sample_texts(tok, 8, 254, seed=7)
    with torch.no_grad():
        enc = tok(texts, return_tensors="pt", truncation=True, max_length=256).to(device)
        logits = model(**enc).logits.float()  # [8, 256, vocab]
        per_text = logits.max(dim=1).values  # the max over tokens, before relu and log1p
        k = min(nnz, per_text.shape[1] - 1)
        shift = per_text.topk(k, dim=1).values[:, -1].mean().item()
        model.cls.predictions.bias.data -= shift
        kept = ((logits.max(dim=1).values - shift) > 0).sum(dim=1).float().mean().item()
    print("splade: decoder bias lowered by %.4f: %.0f non-zeros per 256-token text (target %d)"
          % (shift, kept, nnz))
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    copy_tokenizer(tok_dir, out)
    write_json(os.path.join(out, "modules.json"), [
        {"idx": 0, "name": "0", "path": "",
         "type": "sentence_transformers.sparse_encoder.models.MLMTransformer"},
        {"idx": 1, "name": "1", "path": "1_SpladePooling",
         "type": "sentence_transformers.sparse_encoder.models.SpladePooling"}])
    write_json(os.path.join(out, "1_SpladePooling", "config.json"),
               {"pooling_strategy": "max", "activation_function": "relu",
                "word_embedding_dimension": 30522})
    write_json(os.path.join(out, "sentence_bert_config.json"),
               {"max_seq_length": 256, "do_lower_case": False})
    write_json(os.path.join(out, "config_sentence_transformers.json"),
               {"model_type": "SparseEncoder", "prompts": {"query": "", "document": ""},
                "default_prompt_name": None, "similarity_fn_name": "dot"})


def classifier(out, tiny, tok_dir):
    import torch
    import transformers
    if os.path.exists(os.path.join(out, "model.safetensors")):
        return
    torch.manual_seed(32)
    labels = ["negative", "neutral", "positive"]
    cfg = bert_config(tiny, architectures=["BertForSequenceClassification"], num_labels=3,
                      id2label=dict(enumerate(labels)),
                      label2id={l: i for i, l in enumerate(labels)})
    model = transformers.BertForSequenceClassification(cfg)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    copy_tokenizer(tok_dir, out)


def colbert(out, tiny, tok_dir):
    import torch
    import transformers
    from safetensors.torch import save_file
    if os.path.exists(os.path.join(out, "model.safetensors")):
        return
    torch.manual_seed(33)
    cfg = bert_config(tiny, architectures=["BertModel"])
    model = transformers.BertModel(cfg, add_pooling_layer=False)
    model.to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
    copy_tokenizer(tok_dir, out)
    dim = 24 if tiny else 128
    w = torch.randn(dim, cfg.hidden_size) / cfg.hidden_size ** 0.5
    os.makedirs(os.path.join(out, "1_Dense"), exist_ok=True)
    save_file({"linear.weight": w.to(torch.bfloat16).contiguous()},
              os.path.join(out, "1_Dense", "model.safetensors"))
    write_json(os.path.join(out, "1_Dense", "config.json"),
               {"in_features": cfg.hidden_size, "out_features": dim, "bias": False,
                "activation_function": "torch.nn.modules.linear.Identity"})
    write_json(os.path.join(out, "modules.json"), [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"}])
    write_json(os.path.join(out, "config_sentence_transformers.json"),
               {"model_type": "ColBERT", "prompts": {}, "default_prompt_name": None,
                "similarity_fn_name": "MaxSim", "query_prefix": "[unused0]",
                "document_prefix": "[unused1]", "query_length": 32, "document_length": 256,
                "attend_to_expansion_tokens": False, "do_query_expansion": True})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--nnz", type=int, default=200)
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "all-MiniLM-L6-v2"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    splade(os.path.join(a.out, "splade"), a.tiny, a.device, a.nnz, a.tokenizer)
    classifier(os.path.join(a.out, "classifier"), a.tiny, a.tokenizer)
    colbert(os.path.join(a.out, "colbert"), a.tiny, a.tokenizer)
    print("model folders in", a.out)


if __name__ == "__main__":
    main()
