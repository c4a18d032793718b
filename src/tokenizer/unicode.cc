// Character-class table and UTF-8 validation for the tokenizer (see unicode.h).
#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <cstring>
#include <vector>

namespace petal::tok {
namespace {

struct CodeRange {
  char32_t lo, hi;
};
struct LowerPair {
  char32_t from, to;
};
#include "tokenizer/unicode_tables.inc"

template <size_t N>
void MarkRanges(const CodeRange (&ranges)[N], uint16_t flag, std::vector<uint16_t>* t) {
  for (const CodeRange& r : ranges) {
    for (char32_t c = r.lo; c <= r.hi; ++c) (*t)[c] |= flag;
  }
}

constexpr char32_t kMaxCodePoint = 0x10FFFF;

bool IsWhitespaceCp(char32_t c) {
  // The White_Space property: what Rust's char::is_whitespace and Oniguruma's \s accept.
  switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool IsCjkCp(char32_t c) {
  // The CJK Unified Ideograph blocks that BERT surrounds with spaces (not Hangul or kana).
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

uint16_t ComputeFlags(char32_t c) {
  uint16_t f = 0;
  if (IsWhitespaceCp(c)) f |= kFlagWhitespace;
  if (c == '\r' || c == '\n') f |= kFlagNewline;
  if (IsCjkCp(c)) f |= kFlagCjk;
  if (c < 0xD800 || c > 0xDFFF) {
    const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
    bool hangul_syllable = c >= 0xAC00 && c <= 0xD7A3;
    if (p->combining_class == 0 && p->decomp_seqindex == UINT16_MAX && !hangul_syllable) {
      f |= kFlagNfdStable;
    }
  }
  return f;
}

const std::vector<uint16_t>& FlagTable() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(kMaxCodePoint + 1);
    for (char32_t c = 0; c <= kMaxCodePoint; ++c) t[c] = ComputeFlags(c);
    // The classes tokenizers applies, measured from it (see unicode_tables.inc).
    MarkRanges(kBertControl, kFlagControl, &t);
    MarkRanges(kBertNonspacingMark, kFlagMn, &t);
    MarkRanges(kBertPunctuation, kFlagPunct, &t);
    MarkRanges(kRegexLetter, kFlagLetter, &t);
    MarkRanges(kRegexNumber, kFlagNumber, &t);
    MarkRanges(kNormInert, kFlagNormInert, &t);
    MarkRanges(kGraphemeJoin, kFlagGraphemeJoin, &t);
    return t;
  }();
  return table;
}

}  // namespace

namespace detail {
const uint16_t* const g_char_flags = FlagTable().data();
}  // namespace detail

char32_t ToLowerSimple(char32_t cp) {
  static const std::vector<char32_t>& table = *[] {
    auto* t = new std::vector<char32_t>(0x20000);
    for (char32_t c = 0; c < t->size(); ++c) (*t)[c] = c;
    for (const LowerPair& p : kLowercase) {
      if (p.from < t->size()) (*t)[p.from] = p.to;
    }
    return t;
  }();
  if (cp < table.size()) return table[cp];
  for (const LowerPair& p : kLowercase) {  // Only a few dozen mappings lie above U+1FFFF.
    if (p.from == cp) return p.to;
  }
  return cp;
}

bool IsAscii(std::string_view s) {
  size_t i = 0;
  uint64_t acc = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    acc |= w;
  }
  for (; i < s.size(); ++i) acc |= static_cast<unsigned char>(s[i]);
  return (acc & 0x8080808080808080ULL) == 0;
}

bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char b = p[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    int len;
    char32_t cp, min;
    if ((b & 0xE0) == 0xC0) {
      len = 2, cp = b & 0x1F, min = 0x80;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, cp = b & 0x0F, min = 0x800;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, cp = b & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (cp < min || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

}  // namespace petal::tok
