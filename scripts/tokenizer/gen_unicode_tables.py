#!/usr/bin/env python3
"""Generates src/tokenizer/unicode_tables.inc: the character classes Hugging Face `tokenizers`
actually applies, measured by running its normalizers and pre-tokenizers on every code point.

Why: `tokenizers` takes BERT's control / nonspacing-mark / punctuation classes from an older
Unicode version than utf8proc's (and its lowercase mapping from a newer one), so deriving them
from utf8proc alone gives different tokens for a few hundred code points. This script measures
the behaviour (black box, no source copied) and writes range tables; re-run it when the pinned
`tokenizers` version changes.

Usage: .venv/bin/python scripts/tokenizer/gen_unicode_tables.py \
           [models/tokenizers/multilingual-e5-small/tokenizer.json] > src/tokenizer/unicode_tables.inc
The optional tokenizer (any with a Precompiled normalizer) is used to measure grapheme clusters.
"""
import ctypes
import sys
import unicodedata

import tokenizers
from tokenizers.normalizers import NFC, NFD, BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer, Split

QWEN = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
        "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def ranges(cps):
    out = []
    for c in sorted(cps):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def emit(name, cps):
    rs = ranges(cps)
    print(f"// {len(cps)} code points in {len(rs)} ranges.")
    print(f"constexpr CodeRange {name}[] = {{")
    line = " "
    for lo, hi in rs:
        item = f" {{0x{lo:X}, 0x{hi:X}}},"
        if len(line) + len(item) > 98:
            print(line)
            line = " "
        line += item
    print(line)
    print("};")


def normalization_inert():
    """Code points whose combining class or (de)composition tokenizers does not know."""
    lib = ctypes.CDLL("libutf8proc.so.2")
    lib.utf8proc_get_property.restype = ctypes.POINTER(ctypes.c_int16 * 2)

    def ccc(c):
        return lib.utf8proc_get_property(c).contents[1]

    nfd, nfc = NFD(), NFC()
    inert = set()
    for c in range(0x110000):
        if 0xD800 <= c <= 0xDFFF:
            continue
        ch = chr(c)
        k = ccc(c)
        # U+0345 has class 240, above every other; a mark with a known lower class moves before it.
        if 0 < k < 240 and nfd.normalize_str("a\u0345" + ch) == "a\u0345" + nfd.normalize_str(ch):
            inert.add(c)
        d = unicodedata.decomposition(ch)
        if d and not d.startswith("<"):
            parts = "".join(chr(int(x, 16)) for x in d.split())
            if nfd.normalize_str(ch) == ch:  # tokenizers does not decompose it.
                inert.add(c)
                inert.update(ord(p) for p in parts[1:])
    # Hangul LV + T composes algorithmically; U+11A7 (T index 0) must not, and utf8proc does it.
    for t in range(0x11A7, 0x11C3):
        if nfc.normalize_str("\uAC00" + chr(t)) == "\uAC00" + chr(t):
            inert.add(t)
    return sorted(inert)


def grapheme_joiners(path):
    """Code points tokenizers' grapheme segmentation attaches to a preceding cluster while
    utf8proc starts a new cluster (tokenizers follows a newer Unicode there)."""
    lib = ctypes.CDLL("libutf8proc.so.2")
    lib.utf8proc_grapheme_break_stateful.restype = ctypes.c_bool
    n = tokenizers.Tokenizer.from_file(path).normalizer
    base = n.normalize_str("I\u0301")  # One short cluster the charsmap rewrites as a whole.
    joiners = []
    for c in range(0x110000):
        if 0xD800 <= c <= 0xDFFF:
            continue
        alone = n.normalize_str(chr(c))
        if alone == "":
            continue
        hf_join = n.normalize_str("I\u0301" + chr(c)) != base + alone
        state = ctypes.c_int32(0)
        lib.utf8proc_grapheme_break_stateful(0x49, 0x301, ctypes.byref(state))
        u_join = not lib.utf8proc_grapheme_break_stateful(0x301, c, ctypes.byref(state))
        assert not (u_join and not hf_join), hex(c)
        if hf_join and not u_join:
            joiners.append(c)
    return joiners


def main():
    clean = BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False,
                           lowercase=False)
    strip = BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True,
                           lowercase=False)
    lower = BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=False,
                           lowercase=True)
    pre = BertPreTokenizer()
    # Split isolates each match; the pattern's classes show through short probes.
    qwen = Split(tokenizers.Regex(QWEN), behavior="isolated")
    control, mark, punct, letter, number = [], [], [], [], []
    lower_map = []
    for c in range(0x110000):
        if 0xD800 <= c <= 0xDFFF:
            continue
        ch = chr(c)
        if clean.normalize_str(ch) == "" and c not in (0, 0xFFFD):
            control.append(c)
        if strip.normalize_str(ch) == "":
            mark.append(c)
        if len(pre.pre_tokenize_str("a" + ch + "a")) == 3:
            punct.append(c)
        low = lower.normalize_str(ch)
        if low != ch:
            assert len(low) == 1 or c == 0x130, (hex(c), low)
            if len(low) == 1:
                lower_map.append((c, ord(low)))
        # \p{L}: "a" + ch + "a" stays one piece only if ch is a letter. \p{N}: each digit is its
        # own piece, so "#" + ch + "#" gives 3 pieces with ch alone; other symbols join the "#"s.
        if ch not in "\r\n" and [p for p, _ in qwen.pre_tokenize_str("a" + ch + "a")] == ["a" + ch + "a"]:
            letter.append(c)
        # Whitespace also stands alone between "#"s, but unlike a number it joins a following letter.
        if ([p for p, _ in qwen.pre_tokenize_str("#" + ch + "#")] == ["#", ch, "#"] and
                [p for p, _ in qwen.pre_tokenize_str(ch + "x")] == [ch, "x"] and ch not in "\r\n"):
            number.append(c)
    inert = normalization_inert()
    charsmap_tok = sys.argv[1] if len(sys.argv) > 1 else \
        "models/tokenizers/multilingual-e5-small/tokenizer.json"
    joiners = grapheme_joiners(charsmap_tok)
    print("// Generated by scripts/tokenizer/gen_unicode_tables.py from tokenizers "
          f"{tokenizers.__version__}; do not edit.")
    print("// Character classes as Hugging Face tokenizers applies them (see the script for why).")
    emit("kBertControl", control)
    emit("kBertNonspacingMark", mark)
    emit("kBertPunctuation", punct)
    emit("kRegexLetter", letter)
    emit("kRegexNumber", number)
    print("// Code points tokenizers' NFC/NFD treat as unassigned (combining class 0, no")
    print("// decomposition or composition) while utf8proc knows them.")
    emit("kNormInert", inert)
    print("// Code points that extend the preceding grapheme cluster in tokenizers but not in utf8proc.")
    emit("kGraphemeJoin", joiners)
    print(f"// {len(lower_map)} single-code-point lowercase mappings (U+0130 is handled in code).")
    print("constexpr LowerPair kLowercase[] = {")
    line = " "
    for a, b in lower_map:
        item = f" {{0x{a:X}, 0x{b:X}}},"
        if len(line) + len(item) > 98:
            print(line)
            line = " "
        line += item
    print(line)
    print("};")


if __name__ == "__main__":
    main()
