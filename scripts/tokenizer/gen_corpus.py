#!/usr/bin/env python3
"""Generates the tokenizer parity corpus: JSON Lines, one JSON string per line.

Seeded and deterministic. The texts stress what tokenizers get wrong: many scripts (CJK,
Korean, Thai, Telugu, Arabic with RTL marks, Cyrillic, Devanagari, Greek, Hebrew, kana),
emoji with ZWJ sequences, skin tones, flags and keycaps, combining marks, control and
zero-width characters, code, long whitespace and digit runs, English contractions in every
case, special-token strings inside user text, and lengths from 1 to 100,000 characters.

Usage: gen_corpus.py --out corpus.jsonl [--count 20000] [--seed 1] [--sweep]
  --sweep appends texts that together contain every Unicode scalar value, each in context.
"""
import argparse
import json
import random

SPECIAL_STRINGS = [
    "[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]", "[CLS", "SEP]", "[cls]",
    "<s>", "</s>", "<pad>", "<unk>", "<mask>", "< s>", "<S>",
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|im_start|>user\n", "<think>", "</think>",
    "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|vision_start|>", "<|endoftext", "|>",
    "<|box_start|>", "<tool_response>",
]
RANGES = {
    "cjk": [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0xF900, 0xFAFF)],
    "cjk_punct": [(0x3000, 0x303F), (0xFF00, 0xFFEF)],
    "kana": [(0x3040, 0x30FF)],
    "hangul": [(0xAC00, 0xD7A3), (0x1100, 0x11FF), (0x3130, 0x318F)],
    "thai": [(0x0E01, 0x0E5B)],
    "telugu": [(0x0C00, 0x0C7F)],
    "devanagari": [(0x0900, 0x097F)],
    "arabic": [(0x0600, 0x06FF), (0x0750, 0x077F), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF)],
    "hebrew": [(0x0591, 0x05F4)],
    "cyrillic": [(0x0400, 0x04FF)],
    "greek": [(0x0370, 0x03FF), (0x1F00, 0x1FFF)],
    "latin_ext": [(0x00C0, 0x024F), (0x1E00, 0x1EFF)],
    "emoji": [(0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1F680, 0x1F6FF), (0x1F900, 0x1FAFF),
              (0x2600, 0x27BF)],
    "math": [(0x2200, 0x22FF), (0x1D400, 0x1D7FF)],
    "symbols": [(0x2000, 0x206F), (0x20A0, 0x20CF), (0x2100, 0x214F), (0x2190, 0x21FF)],
    "combining": [(0x0300, 0x036F), (0x1AB0, 0x1AFF), (0x20D0, 0x20FF), (0xFE20, 0xFE2F)],
    "fullwidth": [(0xFF01, 0xFF5E)],
}
CONTROL = [chr(c) for c in list(range(0, 32)) + list(range(0x7F, 0xA0))] + [
    "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\ufffd", "\u180e", "\u2061",
    "\ue000", "\uf8ff", "\U000f0000", "\ufffe", "\uffff", "\u0378", "\U000e0001", "\u034f"]
RTL_MARKS = ["\u200e", "\u200f", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066",
             "\u2067", "\u2068", "\u2069", "\u061c"]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2002", "\u2009", "\u200a",
          "\u1680", "\u0085", "\u2028", "\u2029", "\u202f", "\u205f", "\x0b", "\x0c", " \n ",
          "\n\n", "\u2007"]
WORDS = ("the of and to in is you that it he was for on are as with his they at be this have "
         "from or one had by word but not what all were we when your can said there use an each "
         "which she do how their if will up other about out many then them these so some her "
         "would make like him into time has look two more write go see number no way could people "
         "my than first water been call who oil its now find long down day did get come made may "
         "part tokenizer embedding naïve café résumé coöperate Straße İstanbul ΣΊΣΥΦΟΣ ǅemal "
         "ﬁnance ﬀ ½ ² ℃ Ⅻ ⑦ ｈｅｌｌｏ HELLO CamelCase snake_case kebab-case e.g. U.S.A. "
         "don't won't can't I'm you're we've they'll he'd it's isn't ain't y'all o'clock").split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"]
EMOJI_SEQS = ["👨‍👩‍👧‍👦", "👩🏽‍💻", "🏳️‍🌈", "❤️", "1️⃣", "#️⃣", "🇺🇸", "🇯🇵🇫🇷", "👍🏿", "🧑‍🤝‍🧑",
              "😀😃😄", "🤷‍♀️", "👁‍🗨", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "✌🏻", "☺️", "©️", "™"]
CODE = [
    "def f(x):\n    return x ** 2  # square\n", "for (int i = 0; i < n; ++i) { a[i] += b[i]; }\n",
    "{\"key\": [1, 2.5e-3, null, true], \"s\": \"\\u00e9\"}", "SELECT * FROM t WHERE id=42;\n",
    "<div class=\"x\">&amp;&lt;</div>", "if x != y && z >= 0 || !w:\n\tpass\n",
    "std::vector<std::string> v{\"a\", \"b\"};", "$ ls -la | grep '^d' > out.txt 2>&1",
    "    \n        indented();\n\n\n    }\n", "x=1;y=2;z=x+y*3/4%5^6&7|8~9", "https://example.com/a?b=c&d=%20#frag",
    "user@example.org", "0x1F600 0b1010 1_000_000 3.14159 -2e10", "#include <cstdio>\r\nint main(){}\r\n",
    "λx.λy.x y", "a->b; c::d; e=>f; g<=h; i<<=j;", "```python\nprint('hi')\n```",
]


def rand_from(rng, name):
    lo, hi = rng.choice(RANGES[name])
    return chr(rng.randint(lo, hi))


def rand_scalar(rng):
    while True:
        c = rng.randint(0, 0x10FFFF) if rng.random() < 0.3 else rng.randint(0, 0x2FFFF)
        if not 0xD800 <= c <= 0xDFFF:
            return chr(c)


def case_variant(rng, s):
    r = rng.random()
    if r < 0.3:
        return s.upper()
    if r < 0.5:
        return s.capitalize()
    if r < 0.7:
        return "".join(ch.upper() if rng.random() < 0.5 else ch for ch in s)
    return s


def piece(rng, flavour):
    """One short fragment of the given flavour."""
    if flavour == "words":
        return " ".join(case_variant(rng, rng.choice(WORDS)) for _ in range(rng.randint(1, 12)))
    if flavour == "script":
        name = rng.choice(list(RANGES))
        n = rng.randint(1, 20)
        s = "".join(rand_from(rng, name) for _ in range(n))
        if name == "arabic" or name == "hebrew":
            s = rng.choice(RTL_MARKS) + s + rng.choice(RTL_MARKS)
        return s
    if flavour == "mixed_script":
        return "".join(rand_from(rng, rng.choice(list(RANGES))) if rng.random() < 0.7
                       else rng.choice(SPACES) for _ in range(rng.randint(1, 30)))
    if flavour == "emoji":
        return "".join(rng.choice(EMOJI_SEQS) if rng.random() < 0.6 else rand_from(rng, "emoji")
                       for _ in range(rng.randint(1, 6)))
    if flavour == "combining":
        base = rng.choice("aeiouAEIOUnNcCzZ ıİ日한ไ") if rng.random() < 0.8 else rand_scalar(rng)
        return base + "".join(rand_from(rng, "combining") for _ in range(rng.randint(1, 5)))
    if flavour == "control":
        return "".join(rng.choice(CONTROL) if rng.random() < 0.5 else rng.choice("ab c1")
                       for _ in range(rng.randint(1, 8)))
    if flavour == "code":
        return rng.choice(CODE)
    if flavour == "ws_run":
        return "".join(rng.choice(SPACES) for _ in range(rng.randint(1, 40))) * rng.randint(1, 3)
    if flavour == "digit_run":
        digits = rng.choice(["0123456789", "٠١٢٣٤٥٦٧٨٩", "０１２３", "①②③", "१२३", "¹²³"])
        return "".join(rng.choice(digits) for _ in range(rng.randint(1, 300)))
    if flavour == "contraction":
        w = case_variant(rng, rng.choice(["I", "you", "we", "they", "he", "it", "don", "x", ""]))
        c = case_variant(rng, rng.choice(CONTRACTIONS))
        if rng.random() < 0.1:
            c = c.replace("s", "\u017f")  # long s folds to s
        sep = rng.choice(["", " ", "\n", "'"])
        return w + c + sep + rng.choice(["", "s", "ll", "x", " ", "''"])
    if flavour == "special":
        s = rng.choice(SPECIAL_STRINGS)
        pre = rng.choice(["", " ", "  ", "x", "\n", "\t"])
        post = rng.choice(["", " ", "  ", "y", "\n", "hello"])
        return pre + s + post
    if flavour == "random":
        return "".join(rand_scalar(rng) for _ in range(rng.randint(1, 20)))
    if flavour == "punct":
        return "".join(rng.choice("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~¡¿«»‘’“”„…–—・、。·•") for _ in
                       range(rng.randint(1, 10)))
    raise ValueError(flavour)


FLAVOURS = ["words"] * 8 + ["script"] * 4 + ["mixed_script", "emoji", "emoji", "combining",
            "control", "code", "code", "ws_run", "digit_run", "contraction", "contraction",
            "special", "special", "random", "punct"]


def make_text(rng, target_len):
    parts, n = [], 0
    focus = rng.choice(FLAVOURS) if rng.random() < 0.5 else None
    while n < target_len:
        p = piece(rng, focus if focus and rng.random() < 0.7 else rng.choice(FLAVOURS))
        sep = rng.choice(["", " ", " ", " ", "\n", ". ", ", "])
        parts.append(p + sep)
        n += len(p) + len(sep)
    text = "".join(parts)
    return text[:target_len] if len(text) > target_len else text


def target_length(rng):
    r = rng.random()
    if r < 0.10:
        return rng.randint(1, 8)
    if r < 0.60:
        return rng.randint(9, 300)
    if r < 0.88:
        return rng.randint(301, 3000)
    if r < 0.985:
        return rng.randint(3001, 30000)
    return rng.randint(30001, 100000)


def sweep_texts():
    """Every scalar value 0..0x10FFFF (no surrogates), 64 per text, each between contexts."""
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for i in range(0, len(cps), 64):
        chunk = cps[i:i + 64]
        yield "".join(f"a{chr(c)}b {chr(c)} 1{chr(c)}{chr(c)}x'{chr(c)}\n" for c in chunk)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sweep", action="store_true")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with open(args.out, "w", encoding="utf-8") as f:
        # A few fixed edge cases first.
        fixed = ["a", " ", "\n", "", "  leading", "trailing  ", "[CLS]", "<|endoftext|>", "<s>",
                 "I'M YOU'RE WE'VE THEY'LL HE'D IT'S", "x" * 100000, "1" * 5000, " " * 3000,
                 "\u0301", "\u200d", "İstanbul", "ǅ", "ﬃ", "⑩", "ΣΑΣ"]
        for t in fixed:
            f.write(json.dumps(t) + "\n")
        for _ in range(args.count - len(fixed)):
            f.write(json.dumps(make_text(rng, target_length(rng))) + "\n")
        if args.sweep:
            for t in sweep_texts():
                f.write(json.dumps(t) + "\n")


if __name__ == "__main__":
    main()
