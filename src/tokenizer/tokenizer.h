// Petal's tokenizer: one interface over the three model families embedding models use,
// loaded from a Hugging Face tokenizer.json and producing exactly the ids `tokenizers` does:
//   - WordPiece (BERT family), byte-level BPE (Qwen2/Qwen3), Unigram (XLM-R / multilingual-e5).
// The pipeline is: added tokens -> normalizer -> pre-tokenizer -> model -> truncation ->
// post-processor template. A configuration we do not implement fails at load, naming the field.
//
// Thread-safety: a loaded Tokenizer is immutable. Encode/EncodeBatch/EncodeInto may be called
// concurrently from any number of threads; an EncodeScratch must be used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace petal {

struct EncodeOptions {
  // Apply the post-processor template ([CLS] ... [SEP], <s> ... </s>, ... <|endoftext|>).
  bool add_special_tokens = true;
  // 0 = no truncation; else the text's tokens are cut so that the result, special tokens
  // included, has at most max_length ids.
  int max_length = 0;
  // Cut from the left (keep the end of the text) instead of the right.
  bool truncate_left = false;
  // Treat special-token strings in user text ("[CLS]", "<|im_end|>") as plain text.
  bool split_special_tokens = false;
};

enum class TokenizerModel { kWordPiece, kBpe, kUnigram };

// How EncodePair truncates a pair over max_length (tokenizers' TruncationStrategy):
// kLongestFirst trims the longer text first (both to about half when both are long);
// kOnlySecond trims only the second text and fails if that is not enough.
enum class PairTruncation { kLongestFirst, kOnlySecond };

// A pair encoding: ids with the pair template, and each id's token-type id (BERT: 0 for the
// first segment and its specials, 1 for the second; RoBERTa/XLM-R: all 0).
struct PairEncoding {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;
  bool truncated = false;  // some content ids were cut to fit max_length
};

// Reusable per-thread buffers; with one per thread, steady-state encoding does not allocate
// beyond growing the caller's output vector.
class EncodeScratch {
 public:
  EncodeScratch();
  ~EncodeScratch();
  EncodeScratch(const EncodeScratch&) = delete;
  EncodeScratch& operator=(const EncodeScratch&) = delete;
  struct Impl;

 private:
  friend class Tokenizer;
  std::unique_ptr<Impl> impl_;
};

struct TokenizerImpl;

class Tokenizer {
 public:
  // Loads a tokenizer.json file.
  static StatusOr<std::unique_ptr<Tokenizer>> FromFile(const std::string& tokenizer_json_path);
  // Loads dir/tokenizer.json.
  static StatusOr<std::unique_ptr<Tokenizer>> FromModelDir(const std::string& dir);
  // Loads from the JSON text itself.
  static StatusOr<std::unique_ptr<Tokenizer>> FromJson(std::string_view json);
  ~Tokenizer();

  // Ids of `text` (invalid UTF-8 is InvalidArgument). Uses a thread-local scratch.
  StatusOr<std::vector<int32_t>> Encode(std::string_view text, const EncodeOptions& opts) const;
  // As Encode, writing into *ids (cleared first) with caller-owned scratch.
  Status EncodeInto(std::string_view text, const EncodeOptions& opts, EncodeScratch* scratch,
                    std::vector<int32_t>* ids) const;
  // Ids of a pair of texts with the pair template; truncation removes from the longer first.
  StatusOr<std::vector<int32_t>> EncodePair(std::string_view a, std::string_view b,
                                            const EncodeOptions& opts) const;
  // The pair with its token-type ids, truncated to opts.max_length (0 = none) by `strategy`
  // exactly as tokenizers does. kOnlySecond fails (InvalidArgument) when the first text and the
  // template alone exceed max_length.
  StatusOr<PairEncoding> EncodePairTyped(std::string_view a, std::string_view b,
                                         const EncodeOptions& opts,
                                         PairTruncation strategy = PairTruncation::kLongestFirst,
                                         EncodeScratch* scratch = nullptr) const;
  // Encodes every text, spread over `num_threads` threads (0 = hardware concurrency).
  StatusOr<std::vector<std::vector<int32_t>>> EncodeBatch(std::span<const std::string_view> texts,
                                                          const EncodeOptions& opts,
                                                          int num_threads = 0) const;

  // Token string of `id` (added tokens included); empty if unknown.
  std::string_view IdToToken(int32_t id) const;
  // Id of the token string, if it is in the vocabulary or an added token.
  std::optional<int32_t> TokenToId(std::string_view token) const;
  // Number of ids: largest id (model or added) + 1.
  int32_t vocab_size() const;
  TokenizerModel model_type() const;
  // Ids the post-processor adds around a single sequence (2 for BERT, 1 for Qwen3-Embedding).
  int num_special_tokens() const;

 private:
  explicit Tokenizer(std::unique_ptr<TokenizerImpl> impl);
  // Ids of the text before truncation and template (content ids) into scratch buffers.
  Status EncodeContent(std::string_view text, const EncodeOptions& opts, EncodeScratch::Impl* s,
                       std::vector<int32_t>* content) const;
  std::unique_ptr<TokenizerImpl> impl_;
};

}  // namespace petal
