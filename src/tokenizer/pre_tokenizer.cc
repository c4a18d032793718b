// Pre-tokenizer steps (see pre_tokenizer.h).
#include "tokenizer/pre_tokenizer.h"

#include <utility>

#include "tokenizer/unicode.h"

namespace petal::tok {
namespace {

// Splits on whitespace (dropped) and isolates each punctuation character.
void SplitBert(std::string_view s, Words* out) {
  size_t i = 0, word = 0;
  while (i < s.size()) {
    size_t start = i;
    unsigned char b = static_cast<unsigned char>(s[i]);
    uint16_t f;
    if (b < 0x80) {
      f = CharFlags(b);
      ++i;
    } else {
      f = CharFlags(DecodeUtf8(s, &i));
    }
    if (f & kFlagWhitespace) {
      out->Add(s.substr(word, start - word));
      word = i;
    } else if (f & kFlagPunct) {
      out->Add(s.substr(word, start - word));
      out->Add(s.substr(start, i - start));
      word = i;
    }
  }
  out->Add(s.substr(word));
}

void SplitWhitespace(std::string_view s, Words* out) {
  size_t i = 0, word = 0;
  while (i < s.size()) {
    size_t start = i;
    if (CharFlags(DecodeUtf8(s, &i)) & kFlagWhitespace) {
      out->Add(s.substr(word, start - word));
      word = i;
    }
  }
  out->Add(s.substr(word));
}

// Code point at `p` (0 past the end) and the position after it.
inline char32_t Peek(std::string_view s, size_t p, size_t* next) {
  if (p >= s.size()) {
    *next = p;
    return 0;
  }
  *next = p;
  return DecodeUtf8(s, next);
}

inline bool FoldEq(char32_t c, char lower) {
  if (c == static_cast<char32_t>(lower) || c == static_cast<char32_t>(lower - 32)) return true;
  return lower == 's' && c == 0x17F;  // LATIN SMALL LETTER LONG S case-folds to 's'.
}

// End of the match of the Qwen2 pattern that starts at i (alternatives tried in order):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}
//   | ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
size_t MatchQwen(std::string_view s, size_t i) {
  const size_t n = s.size();
  size_t p;
  char32_t c = Peek(s, i, &p);
  uint16_t f = CharFlags(c);
  if (c == '\'' && p < n) {
    size_t q, r;
    char32_t d = Peek(s, p, &q);
    if (FoldEq(d, 's') || FoldEq(d, 't') || FoldEq(d, 'm') || FoldEq(d, 'd')) return q;
    char32_t e = Peek(s, q, &r);
    if (q < n && ((FoldEq(d, 'r') && FoldEq(e, 'e')) || (FoldEq(d, 'v') && FoldEq(e, 'e')) ||
                  (FoldEq(d, 'l') && FoldEq(e, 'l')))) {
      return r;
    }
  }
  auto letter_run = [&](size_t from) {
    size_t q = from;
    while (q < n) {
      size_t r;
      if (!(CharFlags(Peek(s, q, &r)) & kFlagLetter)) break;
      q = r;
    }
    return q;
  };
  if (f & kFlagLetter) return letter_run(p);
  if (!(f & (kFlagNewline | kFlagLetter | kFlagNumber)) && p < n) {
    size_t q;
    if (CharFlags(Peek(s, p, &q)) & kFlagLetter) return letter_run(q);
  }
  if (f & kFlagNumber) return p;
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  constexpr uint16_t kNotPunct = kFlagWhitespace | kFlagLetter | kFlagNumber;
  size_t run_start = std::string_view::npos;
  if (!(f & kNotPunct)) {
    run_start = i;
  } else if (c == ' ' && p < n) {
    size_t q;
    if (!(CharFlags(Peek(s, p, &q)) & kNotPunct)) run_start = p;
  }
  if (run_start != std::string_view::npos) {
    size_t q = run_start;
    while (q < n) {
      size_t r;
      if (CharFlags(Peek(s, q, &r)) & kNotPunct) break;
      q = r;
    }
    while (q < n && (s[q] == '\r' || s[q] == '\n')) ++q;
    return q;
  }
  // Here c is whitespace. Scan its run, remembering the last newline and the last char start.
  size_t q = i, last_nl_end = std::string_view::npos, last_start = i;
  while (q < n) {
    size_t r;
    uint16_t g = CharFlags(Peek(s, q, &r));
    if (!(g & kFlagWhitespace)) break;
    if (g & kFlagNewline) last_nl_end = r;
    last_start = q;
    q = r;
  }
  if (last_nl_end != std::string_view::npos) return last_nl_end;  // \s*[\r\n]+
  if (q == n) return q;                                           // \s+(?!\S) at the end
  if (last_start > i) return last_start;  // \s+(?!\S): leave the last space for the next word.
  return q;                               // \s+
}

// End of the match of the GPT-2 pattern that starts at i (alternatives tried in order):
//   's|'t|'re|'ve|'m|'ll|'d | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+
size_t MatchGpt2(std::string_view s, size_t i) {
  const size_t n = s.size();
  if (s[i] == '\'' && i + 1 < n) {
    char d = s[i + 1];
    if (d == 's' || d == 't' || d == 'm' || d == 'd') return i + 2;
    if (i + 2 < n && ((d == 'r' && s[i + 2] == 'e') || (d == 'v' && s[i + 2] == 'e') ||
                      (d == 'l' && s[i + 2] == 'l'))) {
      return i + 3;
    }
  }
  constexpr uint16_t kNotPunct = kFlagWhitespace | kFlagLetter | kFlagNumber;
  size_t p = i;
  if (s[i] == ' ' && i + 1 < n) p = i + 1;  // The optional leading space of alternatives 2-4.
  size_t q;
  uint16_t f = CharFlags(Peek(s, p, &q));
  auto run = [&](uint16_t want_any, bool negate) {
    size_t e = p;
    while (e < n) {
      size_t r;
      uint16_t g = CharFlags(Peek(s, e, &r));
      if (negate ? (g & want_any) != 0 : (g & want_any) == 0) break;
      e = r;
    }
    return e;
  };
  if (p > i || !(f & kFlagWhitespace)) {
    if (f & kFlagLetter) return run(kFlagLetter, false);
    if (f & kFlagNumber) return run(kFlagNumber, false);
    if (!(f & kNotPunct)) return run(kNotPunct, true);
  }
  // Whitespace run from i (a lone space before whitespace, or any other whitespace).
  size_t e = i, last_start = i;
  while (e < n) {
    size_t r;
    if (!(CharFlags(Peek(s, e, &r)) & kFlagWhitespace)) break;
    last_start = e;
    e = r;
  }
  if (e == n || last_start == i) return e;  // \s+ at the end, or a single character.
  return last_start;                        // \s+(?!\S): leave the last one to the next word.
}

void Metaspace(const PreTokStep& st, std::string_view s, bool at_origin, Words* out,
               std::string* tmp) {
  tmp->clear();
  bool prepend = st.prepend == PreTokStep::Prepend::kAlways ||
                 (st.prepend == PreTokStep::Prepend::kFirst && at_origin);
  std::string_view rep = st.replacement;
  // Replace spaces first, then test for a leading replacement (tokenizers' order).
  size_t start_len = 0;
  for (char ch : s) {
    if (ch == ' ') {
      tmp->append(rep);
    } else {
      tmp->push_back(ch);
    }
  }
  if (prepend && tmp->compare(0, rep.size(), rep) != 0) {
    tmp->insert(0, rep);
  }
  (void)start_len;
  if (!st.split) {
    out->Add(*tmp);
    return;
  }
  // MergedWithNext: every replacement character starts a new word.
  std::string_view t = *tmp;
  size_t word = 0, pos = 0;
  while (true) {
    size_t hit = t.find(rep, pos);
    if (hit == std::string_view::npos) break;
    if (hit > word) out->Add(t.substr(word, hit - word));
    word = hit;
    pos = hit + rep.size();
  }
  out->Add(t.substr(word));
}

}  // namespace

void SplitQwen(std::string_view s, Words* out) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = MatchQwen(s, i);
    out->Add(s.substr(i, j - i));
    i = j;
  }
}

void SplitGpt2(std::string_view s, Words* out) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = MatchGpt2(s, i);
    out->Add(s.substr(i, j - i));
    i = j;
  }
}

void PreTokenizer::Run(std::string_view text, bool first_piece, Words* out, Words* tmp) const {
  out->clear();
  if (steps_.empty()) {
    out->Add(text);
    out->first_at_origin = first_piece;
    return;
  }
  std::string meta_buf;
  thread_local std::string meta_spare;
  meta_buf.swap(meta_spare);
  for (size_t k = 0; k < steps_.size(); ++k) {
    const PreTokStep& st = steps_[k];
    // Input of this step: the raw text for the first step, else the previous step's words.
    Words* in = nullptr;
    if (k > 0) {
      std::swap(*out, *tmp);
      in = tmp;
    }
    out->clear();
    size_t count = in ? in->size() : 1;
    bool origin = in ? in->first_at_origin : first_piece;
    for (size_t w = 0; w < count; ++w) {
      std::string_view piece = in ? (*in)[w] : text;
      bool at_origin = origin && w == 0;
      size_t before = out->size();
      switch (st.kind) {
        case PreTokStep::Kind::kBert:
          SplitBert(piece, out);
          break;
        case PreTokStep::Kind::kQwenSplit:
          SplitQwen(piece, out);
          break;
        case PreTokStep::Kind::kWhitespaceSplit:
          SplitWhitespace(piece, out);
          break;
        case PreTokStep::Kind::kByteLevel: {
          std::string_view p = piece;
          if (st.add_prefix_space && piece[0] != ' ') {
            meta_buf.assign(" ");
            meta_buf.append(piece);
            p = meta_buf;
          }
          if (st.use_regex) {
            SplitGpt2(p, out);
          } else {
            out->Add(p);
          }
          break;
        }
        case PreTokStep::Kind::kMetaspace:
          Metaspace(st, piece, at_origin, out, &meta_buf);
          break;
      }
      if (w == 0 && before == 0) {
        // Whether the first produced word still starts at the piece's origin: only when the
        // step did not drop leading text (whitespace splitting can).
        out->first_at_origin = at_origin && out->size() > 0 &&
                               (piece.empty() || !(CharFlags(piece[0]) & kFlagWhitespace));
      }
    }
  }
  meta_buf.swap(meta_spare);
}

}  // namespace petal::tok
