// Added-token matching (see added_vocab.h).
#include "tokenizer/added_vocab.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace petal::tok {
namespace {

// Unicode \w as the regex crate defines it: letters, marks, decimal digits, connector punctuation.
bool IsWordChar(char32_t c) {
  if (c < 0x80)
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  uint16_t f = CharFlags(c);
  return (f & (kFlagLetter | kFlagNumber | kFlagMn)) != 0 || c == 0x200C || c == 0x200D;
}

char32_t LastChar(std::string_view s) {
  size_t p = s.size() - 1;
  while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
  return DecodeUtf8(s, &p);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens,
                                     std::vector<std::string> patterns)
    : tokens_(std::move(tokens)), patterns_(std::move(patterns)) {
  for (uint32_t i = 0; i < tokens_.size(); ++i) {
    if (patterns_[i].empty()) continue;
    by_first_[static_cast<unsigned char>(patterns_[i][0])].push_back(i);
  }
  for (auto& v : by_first_) {
    std::stable_sort(v.begin(), v.end(), [&](uint32_t a, uint32_t b) {
      return patterns_[a].size() > patterns_[b].size();
    });
  }
}

void AddedTokenMatcher::FindMatches(std::string_view text, bool skip_special,
                                    std::vector<Segment>* out) const {
  out->clear();
  size_t cursor = 0;  // End of the last emitted segment.
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const auto& cands = by_first_[static_cast<unsigned char>(text[i])];
    int32_t hit = -1;
    for (uint32_t t : cands) {
      const std::string& p = patterns_[t];
      if (p.size() <= n - i && text.compare(i, p.size(), p) == 0) {
        hit = static_cast<int32_t>(t);
        break;  // Longest first.
      }
    }
    if (hit < 0) {
      ++i;
      continue;
    }
    const AddedToken& tok = tokens_[hit];
    size_t start = i, stop = i + patterns_[hit].size();
    i = stop;  // Matches never overlap, even when this one is then discarded.
    if (skip_special && tok.special) continue;
    if (tok.single_word) {
      bool left_ok = start == 0 || !IsWordChar(LastChar(text.substr(0, start)));
      size_t q = stop;
      bool right_ok = stop == n || !IsWordChar(DecodeUtf8(text, &q));
      if (!left_ok || !right_ok) continue;
    }
    if (tok.lstrip) {
      size_t b = start;
      while (b > 0) {
        size_t p = b - 1;
        while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
        size_t q = p;
        if (!(CharFlags(DecodeUtf8(text, &q)) & kFlagWhitespace)) break;
        b = p;
      }
      start = std::max(b, cursor);
    }
    if (tok.rstrip) {
      while (stop < n) {
        size_t q = stop;
        if (!(CharFlags(DecodeUtf8(text, &q)) & kFlagWhitespace)) break;
        stop = q;
      }
      i = std::max(i, stop);
    }
    if (cursor < start) out->push_back({uint32_t(cursor), uint32_t(start), -1});
    out->push_back({uint32_t(start), uint32_t(stop), tok.id});
    cursor = stop;
  }
  if (cursor < n) out->push_back({uint32_t(cursor), uint32_t(n), -1});
}

}  // namespace petal::tok
