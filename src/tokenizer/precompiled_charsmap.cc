// Precompiled charsmap parsing and normalisation (see precompiled_charsmap.h).
#include "tokenizer/precompiled_charsmap.h"

#include <utf8proc.h>

#include <cstring>

#include "tokenizer/unicode.h"

namespace petal::tok {

bool Base64Decode(std::string_view in, std::string* out) {
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  for (char ch : in) {
    int v;
    if (ch >= 'A' && ch <= 'Z')
      v = ch - 'A';
    else if (ch >= 'a' && ch <= 'z')
      v = ch - 'a' + 26;
    else if (ch >= '0' && ch <= '9')
      v = ch - '0' + 52;
    else if (ch == '+')
      v = 62;
    else if (ch == '/')
      v = 63;
    else if (ch == '=' || ch == '\n' || ch == '\r')
      continue;
    else
      return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return true;
}

StatusOr<std::shared_ptr<const PrecompiledCharsmap>> PrecompiledCharsmap::Parse(std::string blob) {
  if (blob.size() < 4) return DataLoss("precompiled_charsmap: shorter than its 4-byte header");
  uint32_t trie_bytes;
  std::memcpy(&trie_bytes, blob.data(), 4);  // Little-endian, as SentencePiece writes it.
  if (trie_bytes % 4 != 0 || trie_bytes > blob.size() - 4 || trie_bytes == 0) {
    return DataLoss("precompiled_charsmap: trie size " + std::to_string(trie_bytes) +
                    " does not fit the " + std::to_string(blob.size()) + "-byte blob");
  }
  auto cm = std::make_shared<PrecompiledCharsmap>();
  cm->units_.resize(trie_bytes / 4);
  std::memcpy(cm->units_.data(), blob.data() + 4, trie_bytes);
  cm->pool_ = blob.substr(4 + trie_bytes);
  cm->pool_.push_back('\0');  // Guarantees every value's string is terminated.
  return std::shared_ptr<const PrecompiledCharsmap>(std::move(cm));
}

const char* PrecompiledCharsmap::Transform(std::string_view key, size_t* out_len) const {
  // darts-clone unit layout: bit 8 = has leaf, low 8 bits (+ bit 31) = label, the offset to
  // the children is bits 10.. shifted by 8 more when bit 9 is set; a leaf unit holds the value.
  auto offset = [](uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
  const size_t n = units_.size();
  size_t pos = 0;
  uint32_t unit = units_[0];
  pos ^= offset(unit);
  for (unsigned char c : key) {
    if (c == 0) break;
    pos ^= c;
    if (pos >= n) return nullptr;
    unit = units_[pos];
    if ((unit & ((1u << 31) | 0xFF)) != c) return nullptr;
    pos ^= offset(unit);
    if (pos >= n) return nullptr;
    if ((unit >> 8) & 1) {
      // First hit is the shortest matching prefix; SentencePiece-compatible code uses exactly it.
      uint32_t value = units_[pos] & ((1u << 31) - 1);
      if (value >= pool_.size()) return nullptr;
      const char* s = pool_.data() + value;
      *out_len = std::strlen(s);
      return s;
    }
  }
  return nullptr;
}

namespace {
// Grapheme rule GB4: a cluster always ends after a control character, CR or LF.
bool BreaksAfter(char32_t c) {
  int b = utf8proc_get_property(static_cast<utf8proc_int32_t>(c))->boundclass;
  return b == UTF8PROC_BOUNDCLASS_CR || b == UTF8PROC_BOUNDCLASS_LF ||
         b == UTF8PROC_BOUNDCLASS_CONTROL;
}
}  // namespace

void PrecompiledCharsmap::Normalize(std::string_view in, std::string* out) const {
  out->clear();
  size_t i = 0;
  utf8proc_int32_t state = 0;
  while (i < in.size()) {
    // Find the end of the extended grapheme cluster starting at i.
    size_t g_end = i;
    char32_t prev = DecodeUtf8(in, &g_end);
    state = 0;
    while (g_end < in.size()) {
      size_t next = g_end;
      char32_t c = DecodeUtf8(in, &next);
      // utf8proc's Unicode predates a few extending marks tokenizers knows (see tables).
      if (utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(prev),
                                           static_cast<utf8proc_int32_t>(c), &state) &&
          !((CharFlags(c) & kFlagGraphemeJoin) && !BreaksAfter(prev))) {
        break;
      }
      prev = c;
      g_end = next;
    }
    std::string_view grapheme = in.substr(i, g_end - i);
    size_t len = 0;
    const char* rep = nullptr;
    if (grapheme.size() < 6) rep = Transform(grapheme, &len);
    if (rep != nullptr) {
      out->append(rep, len);
    } else {
      size_t k = 0;
      while (k < grapheme.size()) {
        size_t start = k;
        k += Utf8SeqLen(static_cast<unsigned char>(grapheme[k]));
        std::string_view part = grapheme.substr(start, k - start);
        const char* r = Transform(part, &len);
        if (r != nullptr) {
          out->append(r, len);
        } else {
          out->append(part);
        }
      }
    }
    i = g_end;
  }
}

}  // namespace petal::tok
