#!/usr/bin/env python3
"""Move model folders to the GPU machine in parts that fit the run tool's carry limit.

The run tool carries at most 64 MiB per call (work tree included); all-MiniLM-L6-v2 alone is 87 MiB.
So `pack` cuts the model files (byte-exact, no conversion) into parts of at most --part-mib under
.gpu_carry/part-NN/ (git-ignored), and on the GPU machine `unpack` (run_on_device.sh's `unpack` and
`golden` steps) writes whatever parts have arrived into .gpu_models/<name>/, verifying each file's
sha256 once all of its bytes are there. Ignored folders survive between calls while the machine
stays warm, so:

  here:    python3 scripts/gpu/pack_models.py pack models/all-MiniLM-L6-v2       # -> part-01, part-02
  call 1:  carry [".gpu_carry/part-01"]  command: bash scripts/gpu/run_on_device.sh unpack
  call 2:  carry [".gpu_carry/part-02"]  command: bash scripts/gpu/run_on_device.sh golden

`unpack` says which parts are still missing. Standard library only.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

SKIP = {"README.md", "data_config.json"}  # large, not needed to load a model


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pack(models: list[Path], out: Path, part_mib: float) -> int:
    limit = int(part_mib * (1 << 20))
    files = []
    for m in models:
        if not (m / "modules.json").is_file():
            print(f"[pack] {m}: not a sentence-transformers model folder", file=sys.stderr)
            return 2
        for p in sorted(m.rglob("*")):
            rel = p.relative_to(m).as_posix()
            if p.is_file() and not any(s.startswith(".") for s in rel.split("/")) and rel not in SKIP:
                files.append({"model": m.name, "file": rel, "size": p.stat().st_size,
                              "sha256": sha256_file(p), "src": p})
    if out.exists():
        shutil.rmtree(out)
    parts: list[list[dict]] = [[]]
    used = 0
    for f in files:
        off = 0
        while off < f["size"] or (f["size"] == 0 and off == 0):
            if used >= limit:
                parts.append([])
                used = 0
            n = min(f["size"] - off, limit - used)
            parts[-1].append({"model": f["model"], "file": f["file"], "offset": off, "length": n,
                              "file_size": f["size"], "file_sha256": f["sha256"], "src": f["src"]})
            used += n
            off += n
            if f["size"] == 0:
                break
    index = {"parts": len(parts), "files": [{k: f[k] for k in ("model", "file", "size", "sha256")} for f in files]}
    index["pack_id"] = hashlib.sha256(json.dumps(index, sort_keys=True).encode()).hexdigest()[:16]
    for i, pieces in enumerate(parts, 1):
        d = out / f"part-{i:02d}"
        d.mkdir(parents=True)
        for j, pc in enumerate(pieces):
            with pc["src"].open("rb") as src, (d / f"{j:03d}.bin").open("wb") as dst:
                src.seek(pc["offset"])
                left = pc["length"]
                while left:
                    buf = src.read(min(left, 1 << 20))
                    dst.write(buf)
                    left -= len(buf)
            pc["blob"] = f"{j:03d}.bin"
            del pc["src"]
        (d / "part.json").write_text(json.dumps({"part": i, "index": index, "pieces": pieces}, indent=1))
        size = sum(pc["length"] for pc in pieces)
        print(f"[pack] {d}: {size / (1 << 20):.1f} MiB, {len(pieces)} pieces")
    print(f"[pack] {len(parts)} parts: carry one per run call (each call may carry 64 MiB in all)")
    return 0


def unpack(carry: Path, dest: Path) -> int:
    dest.mkdir(parents=True, exist_ok=True)
    state_path = dest / ".received.json"
    state = json.loads(state_path.read_text()) if state_path.is_file() else {"parts": [], "ranges": {}}
    index = None
    for pj in sorted(carry.glob("part-*/part.json")):
        part = json.loads(pj.read_text())
        index = part["index"]
        if state.get("index", {}).get("pack_id") not in (None, index["pack_id"]):
            print("[unpack] parts from a new pack: starting over")
            for p in dest.rglob("*.partial"):
                p.unlink()
            state = {"parts": [], "ranges": {}}
        state["index"] = index
        if part["part"] in state["parts"]:
            continue
        for pc in part["pieces"]:
            target = dest / pc["model"] / pc["file"]
            partial = target.with_name(target.name + ".partial")
            partial.parent.mkdir(parents=True, exist_ok=True)
            if not partial.exists():
                with partial.open("wb") as f:
                    f.truncate(pc["file_size"])
            with partial.open("r+b") as f, (pj.parent / pc["blob"]).open("rb") as src:
                f.seek(pc["offset"])
                shutil.copyfileobj(src, f, 1 << 20)
            key = f"{pc['model']}/{pc['file']}"
            state["ranges"].setdefault(key, []).append([pc["offset"], pc["length"]])
        state["parts"].append(part["part"])
        print(f"[unpack] took {pj.parent.name}")
    if index is None and not state.get("index"):
        print(f"[unpack] no parts under {carry}/ (pack with scripts/gpu/pack_models.py, carry .gpu_carry/part-NN)")
        return 1
    index = index or state["index"]
    state["index"] = index
    state_path.write_text(json.dumps(state))
    ok = True
    for f in index["files"]:
        key = f"{f['model']}/{f['file']}"
        target = dest / f["model"] / f["file"]
        if target.is_file():
            continue
        got = sum(n for _, n in state["ranges"].get(key, []))
        partial = target.with_name(target.name + ".partial")
        if got >= f["size"] and partial.exists():
            if sha256_file(partial) != f["sha256"]:
                print(f"[unpack] {key}: sha256 mismatch after assembly")
                ok = False
                continue
            partial.rename(target)
        else:
            ok = False
    missing = sorted(set(range(1, index["parts"] + 1)) - set(state["parts"]))
    models = sorted({f["model"] for f in index["files"]})
    for m in models:
        done = all((dest / f["model"] / f["file"]).is_file() for f in index["files"] if f["model"] == m)
        print(f"[unpack] {m}: {'complete, verified' if done else 'incomplete'} in {dest / m}")
    if missing:
        print(f"[unpack] parts still missing: {missing}")
    return 0 if ok and not missing else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="cut model folders into .gpu_carry/part-NN")
    p.add_argument("models", nargs="+", type=Path)
    p.add_argument("--out", type=Path, default=Path(".gpu_carry"))
    p.add_argument("--part-mib", type=float, default=45.0)
    u = sub.add_parser("unpack", help="assemble carried parts into model folders (GPU machine)")
    u.add_argument("--carry", type=Path, default=Path(".gpu_carry"))
    u.add_argument("--dest", type=Path, default=Path(".gpu_models"))
    a = ap.parse_args()
    if a.cmd == "pack":
        return pack(a.models, a.out, a.part_mib)
    return unpack(a.carry, a.dest)


if __name__ == "__main__":
    sys.exit(main())
