// Internal: the parts a loaded Tokenizer is made of, shared by the loader and the encoder.
// Thread-safety: built by LoadTokenizerJson, then read-only.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tokenizer/added_vocab.h"
#include "tokenizer/model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace petal {

struct TokenizerImpl {
  TokenizerModel type = TokenizerModel::kWordPiece;
  tok::AddedTokenMatcher raw_matcher;   // normalized:false tokens, matched on the input.
  tok::AddedTokenMatcher norm_matcher;  // normalized:true tokens, matched after normalising.
  std::vector<tok::AddedToken> added;
  tok::StringIdMap added_ids;
  tok::Normalizer normalizer;
  tok::PreTokenizer pre_tokenizer;
  std::unique_ptr<tok::Model> model;
  tok::PostProcessor post;
  int32_t vocab_size = 0;
};

// Parses a tokenizer.json; Unimplemented/InvalidArgument errors name the offending field.
StatusOr<std::unique_ptr<TokenizerImpl>> LoadTokenizerJson(std::string_view json);

}  // namespace petal
