// How a ranking model's (query, document) pair becomes one token sequence, shared by the gateway's
// rerank routes, `petal bench rerank` and the tests:
//   - cross-encoders (BERT / XLM-R sequence classifiers): the tokenizer's pair template,
//     [CLS] query [SEP] document [SEP] with token types 0 / 1 (XLM-R: <s> q </s></s> d </s>,
//     all type 0), truncated as tokenizers does (longest_first by default, or only_second);
//   - LM rerankers (Qwen3-Reranker): the model card's prompt, tokenized in three parts and
//     concatenated, prefix + ids("<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {doc}")
//     + suffix, where prefix is the system turn and the user turn's opening and suffix closes the
//     user turn and opens the assistant's with an empty think block; only the middle part is
//     truncated (from the right) so that the whole fits max_length. Token types are all 0.
// Thread-safety: pure functions over an immutable Tokenizer.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "tokenizer/tokenizer.h"

namespace petal {

enum class RankTemplate { kPair, kQwen3Reranker };

struct RankInputOptions {
  RankTemplate templ = RankTemplate::kPair;
  int max_length = 0;  // the model's limit in tokens, specials included (0 = none)
  // Cut pairs longer than max_length (else the pair is refused: OutOfRange naming the length).
  bool truncate = true;
  PairTruncation strategy = PairTruncation::kLongestFirst;
  // kQwen3Reranker: the <Instruct> line; empty = the model card's default web-search instruction.
  std::string instruction;
};

// The Qwen3-Reranker default instruction and its fixed prompt parts (the model card's values).
extern const char* const kQwen3RerankerDefaultInstruction;
extern const char* const kQwen3RerankerPrefix;
extern const char* const kQwen3RerankerSuffix;

// The pair's ids and token types. Without `truncate`, a pair longer than max_length fails with
// OutOfRange "... has N tokens, more than the model's M".
StatusOr<PairEncoding> EncodeRankPair(const Tokenizer& tok, std::string_view query,
                                      std::string_view document, const RankInputOptions& opts,
                                      EncodeScratch* scratch = nullptr);

}  // namespace petal
