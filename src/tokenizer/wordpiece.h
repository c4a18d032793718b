// WordPiece model (BERT family): greedy longest-match-first over the vocabulary, continuation
// pieces carry a prefix ("##"), words longer than max_input_chars_per_word become unk.
//
// Thread-safety: immutable after construction; Tokenize() may run concurrently.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "tokenizer/model.h"

namespace petal::tok {

class WordPieceModel : public Model {
 public:
  // `vocab` pairs are (token, id). Fails if the unk token is missing from the vocabulary.
  static StatusOr<std::unique_ptr<WordPieceModel>> Create(
      const std::vector<std::pair<std::string, int32_t>>& vocab, const std::string& unk_token,
      const std::string& prefix, int max_input_chars_per_word);

  void Tokenize(std::string_view word, ModelScratch* scratch,
                std::vector<int32_t>* out) const override;

 private:
  StringIdMap continuation_;  // Keys are vocabulary entries with the prefix removed.
  int32_t unk_id_ = -1;
  int max_chars_ = 100;
};

}  // namespace petal::tok
