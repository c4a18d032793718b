// Post-processors of a tokenizer.json, reduced to what they do to ids for a single sequence:
// TemplateProcessing, BertProcessing and RobertaProcessing wrap the sequence in special tokens
// ([CLS] A [SEP], <s> A </s>, A <|endoftext|> ...); ByteLevel changes only offsets, so it adds
// nothing. Pair templates are kept for EncodePair.
//
// Thread-safety: immutable after load; all methods are const.
#pragma once

#include <cstdint>
#include <vector>

namespace petal::tok {

class PostProcessor {
 public:
  // One template item: a sequence slot (0 = A, 1 = B) or literal special-token ids.
  struct Item {
    int sequence = -1;         // 0 or 1 for $A / $B; -1 for special tokens.
    std::vector<int32_t> ids;  // Special token ids when sequence == -1.
    int type_id = 0;           // token-type id of every id this item yields
  };

  PostProcessor() = default;
  PostProcessor(std::vector<Item> single, std::vector<Item> pair)
      : single_(std::move(single)), pair_(std::move(pair)) {}

  // Number of ids the template adds around one sequence (or a pair).
  int NumAdded(bool pair) const;
  // Writes template(a[, b]) to *out, and each id's token-type id to *type_ids when non-null
  // (without a template: A is type 0, B type 1, as tokenizers does). `b` is ignored unless `pair`.
  void Apply(const std::vector<int32_t>& a, const std::vector<int32_t>* b, bool pair,
             std::vector<int32_t>* out, std::vector<int32_t>* type_ids = nullptr) const;
  // True if the tokenizer.json had no (or a no-op) post-processor.
  bool identity() const { return single_.empty(); }

 private:
  std::vector<Item> single_, pair_;
};

}  // namespace petal::tok
