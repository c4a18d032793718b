// SentencePiece's "precompiled charsmap" normaliser, as stored (base64) in a tokenizer.json
// `Precompiled` normalizer: a darts-clone double-array trie over UTF-8 byte strings whose values
// point into a pool of NUL-terminated replacement strings.
//
// Thread-safety: immutable after Parse(); Normalize() may run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace petal::tok {

class PrecompiledCharsmap {
 public:
  // Parses the raw (already base64-decoded) blob; DataLoss names what is malformed.
  static StatusOr<std::shared_ptr<const PrecompiledCharsmap>> Parse(std::string blob);

  // Appends the normalised `in` to *out: each extended grapheme cluster shorter than 6 bytes is
  // looked up whole first, otherwise (or on a miss) each code point is looked up on its own.
  void Normalize(std::string_view in, std::string* out) const;

 private:
  // Replacement for the shortest trie key that is a prefix of `key`, or nullptr if none.
  const char* Transform(std::string_view key, size_t* out_len) const;

  std::vector<uint32_t> units_;
  std::string pool_;
};

// Decodes standard base64 (with or without padding); false on malformed input.
bool Base64Decode(std::string_view in, std::string* out);

}  // namespace petal::tok
