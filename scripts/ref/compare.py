#!/usr/bin/env python3
"""Compares `petal embed` output (one JSON array per line) with a reference: JSON Lines of
{"ids", "embedding"} records (bert_numpy.py's output) or a golden_<model>.json whose "cases" array
holds them (scripts/gpu/golden_st.py). Usage: compare.py REF PETAL_OUT.txt; prints per-input
cosine and max abs difference, and exits 1 if any falls outside --min-cos / --max-abs."""
import argparse
import json
import sys

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("ref")
ap.add_argument("petal")
ap.add_argument("--min-cos", type=float, default=0.99999)
ap.add_argument("--max-abs", type=float, default=1e-4)
a = ap.parse_args()
if a.ref.endswith(".json"):
    refs = json.load(open(a.ref))["cases"]
else:
    refs = [json.loads(l) for l in open(a.ref) if l.strip()]
outs = [json.loads(l) for l in open(a.petal) if l.strip()]
assert len(refs) == len(outs), (len(refs), len(outs))
worst_cos, worst_abs, ok = 1.0, 0.0, True
for i, (r, o) in enumerate(zip(refs, outs)):
    x, y = np.array(r["embedding"]), np.array(o, dtype=np.float64)
    cos = float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))
    mad = float(np.abs(x - y).max())
    worst_cos, worst_abs = min(worst_cos, cos), max(worst_abs, mad)
    good = cos >= a.min_cos and mad <= a.max_abs
    ok &= good
    print(f"{i:3d} tokens={len(r['ids']):4d} cos={cos:.12f} max_abs={mad:.3e} {'ok' if good else 'FAIL'}")
print(f"worst: cos={worst_cos:.12f} max_abs={worst_abs:.3e} over {len(refs)} inputs")
sys.exit(0 if ok else 1)
