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
  // Optional pooling spans (late chunking, windowed long inputs). Empty: one output row per
  // sequence, pooled and normalised per the model. Otherwise one row per span, kSpanInts int32
  // each: [start, end) absolute token offsets into token_ids, inside one sequence, non-empty,
  // and flags = pooling (cpu::Pooling value: mean / first token / last token of the span) |
  // kSpanNormalize. Spans of one sequence are contiguous in this list, in sequence order.
  std::vector<int32_t> pool_spans;
  // Optional per-sequence key lengths (BERT family only): sequence i's tokens attend only to its
  // first key_lengths[i] tokens (1..its length), while every token is computed. Empty: all.
  // Multi-vector models' query expansion tokens (MultiVectorKeyLengths, engine.h).
  std::vector<int32_t> key_lengths;
  // Optional per-sequence top-k of a sparse (SPLADE) model's rows (EmbedOptions.max_active_dims):
  // sequence i's row keeps its sparse_top_k[i] largest values (0 = every non-zero). Empty: all.
  std::vector<int32_t> sparse_top_k;

  int num_seqs() const { return cu_seqlens.empty() ? 0 : static_cast<int>(cu_seqlens.size()) - 1; }
  int num_tokens() const { return static_cast<int>(token_ids.size()); }
  int seq_len(int i) const { return cu_seqlens[i + 1] - cu_seqlens[i]; }
  int num_spans() const { return static_cast<int>(pool_spans.size()) / kSpanInts; }
  // Output rows of this batch: one per span when spans are present, else one per sequence.
  int num_rows() const { return pool_spans.empty() ? num_seqs() : num_spans(); }

  static constexpr int kSpanInts = 3;
  static constexpr int32_t kSpanPoolingMask = 0xff;
  static constexpr int32_t kSpanNormalize = 0x100;
  // Appends one span [start, end) (absolute offsets) with `pooling` (a cpu::Pooling value).
  void AddSpan(int32_t start, int32_t end, int32_t pooling, bool normalize);

  // Packs `seqs` end to end.
  static Batch FromSequences(const std::vector<std::vector<int32_t>>& seqs);
  // Appends one sequence.
  void Add(const std::vector<int32_t>& ids);
  // Checks offsets, ids < vocab_size, every sequence length <= max_len (0 = no limit), and the
  // spans (if any): non-empty, inside one sequence each, known flags.
  Status Validate(int vocab_size, int max_len) const;
};

}  // namespace petal
