// The body shared by the tokenizer fuzz targets: one real tokenizer.json from models/ (loaded
// once), and arbitrary bytes as text, valid UTF-8 or not. The first byte picks the options
// (special tokens, truncation length and side, special-token splitting, single text or pair).
// Checked: no crash or sanitizer report; valid UTF-8 always encodes (given a feasible length)
// and invalid UTF-8 never does; ids lie in [0, vocab_size); truncation is respected.
// Thread-safety: libFuzzer calls from one thread; the tokenizer itself is immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"

namespace petal::fuzz {

// RFC 3629 UTF-8 (no overlongs, no surrogates, at most U+10FFFF): the tokenizer's contract.
inline bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = 1, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // truncated sequence
    for (int k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF))) return false;
    if (cp >= 0xD800 && cp <= 0xDFFF) return false;
    i += n + 1;
  }
  return true;
}

inline const Tokenizer& LoadOnce(const char* relative_path) {
  static std::unique_ptr<Tokenizer> tok = [&] {
    auto t = Tokenizer::FromFile(SourceDir() + "/" + relative_path);
    if (!t.ok()) {
      std::fprintf(stderr, "cannot load %s: %s\n", relative_path, t.status().ToString().c_str());
      std::abort();
    }
    return std::move(t).value();
  }();
  return *tok;
}

inline void FuzzTokenizer(const char* relative_path, const uint8_t* data, size_t size) {
  const Tokenizer& tok = LoadOnce(relative_path);
  if (size == 0) return;
  const uint8_t flags = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  EncodeOptions opts;
  opts.add_special_tokens = flags & 1;
  opts.truncate_left = flags & 2;
  opts.split_special_tokens = flags & 4;
  const bool pair = flags & 8;
  opts.max_length = (flags >> 4) * 3;  // 0 (none) .. 45
  const int specials = opts.add_special_tokens ? tok.num_special_tokens() * (pair ? 2 : 1) : 0;
  const bool feasible = opts.max_length == 0 || opts.max_length >= specials;

  StatusOr<std::vector<int32_t>> ids =
      pair ? tok.EncodePair(text.substr(0, text.size() / 2), text.substr(text.size() / 2), opts)
           : tok.Encode(text, opts);
  const bool valid =
      pair ? ValidUtf8(text.substr(0, text.size() / 2)) && ValidUtf8(text.substr(text.size() / 2))
           : ValidUtf8(text);
  if (!valid) PETAL_FUZZ_CHECK(!ids.ok());
  if (valid && feasible && !ids.ok()) {
    std::fprintf(stderr, "valid text rejected: %s\n", ids.status().ToString().c_str());
    std::abort();
  }
  if (!ids.ok()) return;
  if (opts.max_length > 0) PETAL_FUZZ_CHECK(ids->size() <= static_cast<size_t>(opts.max_length));
  for (int32_t id : *ids) PETAL_FUZZ_CHECK(id >= 0 && id < tok.vocab_size());
}

}  // namespace petal::fuzz
