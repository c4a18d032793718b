// The ragged batch format shared by every engine (CPU and CUDA): all sequences' token ids packed
// end to end, with per-sequence offsets. Nothing is padded. Thread-safety: plain value type.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace petal {

struct Batch {
  std::vector<int32_t> token_ids;   // sum of all sequence lengths
  std::vector<int32_t> cu_seqlens;  // num_seqs + 1 offsets, cu_seqlens[0] == 0, non-decreasing
  // Optional BERT token-type ids, same length as token_ids; empty means all zero.
  std::vector<int32_t> token_type_ids;

  int num_seqs() const { return cu_seqlens.empty() ? 0 : static_cast<int>(cu_seqlens.size()) - 1; }
  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int seq_len(int i) const { return cu_seqlens[i + 1] - cu_seqlens[i]; }

  // Packs `seqs` end to end.
  static Batch FromSequences(const std::vector<std::vector<int32_t>>& seqs);
  // Appends one sequence.
  void Add(const std::vector<int32_t>& ids);
  // Checks offsets, ids < vocab_size, and every sequence length <= max_len (0 = no limit).
  Status Validate(int vocab_size, int max_len) const;
};

}  // namespace petal
