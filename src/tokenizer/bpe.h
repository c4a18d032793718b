// Byte-level BPE model (GPT-2 / Qwen2 / Qwen3): a word's UTF-8 bytes map to initial symbols
// through the byte-to-unicode table, then adjacent symbol pairs merge by rank, lowest first
// (leftmost among equal ranks), until no pair has a merge.
//
// Thread-safety: immutable after construction; Tokenize() may run concurrently.
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "tokenizer/model.h"

namespace petal::tok {

// The GPT-2 byte-to-unicode table: printable Latin-1 bytes map to themselves, the rest to
// U+0100 onwards in byte order. Returns the UTF-8 string for each byte.
const std::array<std::string, 256>& ByteToUnicode();

class BpeModel : public Model {
 public:
  // `merges` are pairs of token strings in rank order. `ignore_merges`: a word that is itself
  // in the vocabulary is emitted whole.
  static StatusOr<std::unique_ptr<BpeModel>> Create(
      const std::vector<std::pair<std::string, int32_t>>& vocab,
      const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges);

  void Tokenize(std::string_view word, ModelScratch* scratch,
                std::vector<int32_t>* out) const override;

 private:
  struct MergeSlot {
    uint64_t key = ~0ULL;  // (left << 32) | right; ~0 = empty.
    int32_t rank = 0;
    int32_t new_id = 0;
  };
  // Merge of (left, right), or nullptr.
  const MergeSlot* FindMerge(int32_t left, int32_t right) const {
    uint64_t key =
        (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
    uint64_t h = key * 0x9E3779B97F4A7C15ULL;
    for (size_t i = (h >> 20) & merge_mask_;; i = (i + 1) & merge_mask_) {
      const MergeSlot& s = merges_[i];
      if (s.key == key) return &s;
      if (s.key == ~0ULL) return nullptr;
    }
  }

  // Merges one word (no cache).
  void Merge(std::string_view word, ModelScratch* scratch, std::vector<int32_t>* out) const;

  std::array<int32_t, 256> byte_id_{};
  std::vector<MergeSlot> merges_;
  size_t merge_mask_ = 0;
  bool ignore_merges_ = false;
};

}  // namespace petal::tok
