// Added tokens of a tokenizer.json (`added_tokens`): strings matched in the input before the
// model runs and mapped straight to their ids. Tokens with normalized:false match the raw text;
// normalized:true ones match the normalised text. Matching is leftmost-longest and
// non-overlapping; lstrip/rstrip absorb neighbouring whitespace; single_word rejects matches
// inside words.
//
// Thread-safety: immutable after load; FindMatches() may run concurrently.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace petal::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool normalized = false;
  bool lstrip = false, rstrip = false, single_word = false;
};

// One piece of a split: [begin, end) of the searched text, and the added token id or -1.
struct Segment {
  uint32_t begin, end;
  int32_t id;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `patterns[i]` is what token `tokens[i]` matches (its content, or its normalised content).
  AddedTokenMatcher(std::vector<AddedToken> tokens, std::vector<std::string> patterns);

  bool empty() const { return tokens_.empty(); }
  // Splits `text` into segments covering it. `skip_special`: special tokens' matches are
  // ignored (their text is then encoded as plain text), as tokenizers' encode_special_tokens.
  void FindMatches(std::string_view text, bool skip_special, std::vector<Segment>* out) const;

 private:
  std::vector<AddedToken> tokens_;
  std::vector<std::string> patterns_;
  // Token indices by first byte, longest pattern first.
  std::array<std::vector<uint32_t>, 256> by_first_{};
};

}  // namespace petal::tok
