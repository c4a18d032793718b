#include "engine/batch.h"

#include <string>

namespace petal {

Batch Batch::FromSequences(const std::vector<std::vector<int32_t>>& seqs) {
  Batch b;
  b.cu_seqlens.reserve(seqs.size() + 1);
  b.cu_seqlens.push_back(0);
  for (const auto& s : seqs) b.Add(s);
  return b;
}

void Batch::Add(const std::vector<int32_t>& ids) {
  if (cu_seqlens.empty()) cu_seqlens.push_back(0);
  token_ids.insert(token_ids.end(), ids.begin(), ids.end());
  cu_seqlens.push_back(static_cast<int32_t>(token_ids.size()));
}

void Batch::AddSpan(int32_t start, int32_t end, int32_t pooling, bool normalize) {
  pool_spans.push_back(start);
  pool_spans.push_back(end);
  pool_spans.push_back((pooling & kSpanPoolingMask) | (normalize ? kSpanNormalize : 0));
}

Status Batch::Validate(int vocab_size, int max_len) const {
  if (cu_seqlens.empty() || cu_seqlens[0] != 0)
    return InvalidArgument("cu_seqlens must start at 0");
  if (cu_seqlens.back() != num_tokens()) {
    return InvalidArgument("cu_seqlens ends at " + std::to_string(cu_seqlens.back()) +
                           " but batch has " + std::to_string(num_tokens()) + " tokens");
  }
  if (!token_type_ids.empty() && token_type_ids.size() != token_ids.size()) {
    return InvalidArgument("token_type_ids has a different length than token_ids");
  }
  for (int s = 0; s < num_seqs(); ++s) {
    int len = seq_len(s);
    if (len < 0) return InvalidArgument("sequence " + std::to_string(s) + " has negative length");
    if (max_len > 0 && len > max_len) {
      return InvalidArgument("sequence " + std::to_string(s) + " has " + std::to_string(len) +
                             " tokens, more than the model maximum of " + std::to_string(max_len));
    }
  }
  for (size_t i = 0; i < token_ids.size(); ++i) {
    if (token_ids[i] < 0 || token_ids[i] >= vocab_size) {
      return InvalidArgument("token id " + std::to_string(token_ids[i]) + " at position " +
                             std::to_string(i) + " is outside the vocabulary [0, " +
                             std::to_string(vocab_size) + ")");
    }
  }
  if (!key_lengths.empty()) {
    if (static_cast<int>(key_lengths.size()) != num_seqs())
      return InvalidArgument("key_lengths must hold one entry per sequence");
    for (int s = 0; s < num_seqs(); ++s) {
      if (key_lengths[s] < 1 || key_lengths[s] > seq_len(s))
        return InvalidArgument("key_lengths[" + std::to_string(s) +
                               "] = " + std::to_string(key_lengths[s]) + " is outside [1, " +
                               std::to_string(seq_len(s)) + "]");
    }
  }
  if (!sparse_top_k.empty()) {
    if (static_cast<int>(sparse_top_k.size()) != num_seqs())
      return InvalidArgument("sparse_top_k must hold one entry per sequence");
    for (int s = 0; s < num_seqs(); ++s) {
      if (sparse_top_k[s] < 0)
        return InvalidArgument("sparse_top_k[" + std::to_string(s) + "] is negative");
    }
  }
  if (pool_spans.size() % kSpanInts != 0)
    return InvalidArgument("pool_spans must hold " + std::to_string(kSpanInts) + " ints per span");
  int seq = 0;  // spans come in sequence order: walk the sequences alongside
  for (int i = 0; i < num_spans(); ++i) {
    const int32_t start = pool_spans[kSpanInts * i], end = pool_spans[kSpanInts * i + 1];
    const int32_t flags = pool_spans[kSpanInts * i + 2];
    const std::string where = "pool span " + std::to_string(i);
    if (start < 0 || end <= start || end > num_tokens())
      return InvalidArgument(where + " [" + std::to_string(start) + ", " + std::to_string(end) +
                             ") is empty or outside the batch's " + std::to_string(num_tokens()) +
                             " tokens");
    while (seq < num_seqs() && cu_seqlens[seq + 1] <= start) ++seq;
    if (seq >= num_seqs() || start < cu_seqlens[seq] || end > cu_seqlens[seq + 1])
      return InvalidArgument(where + " crosses a sequence boundary or is out of sequence order");
    if ((flags & ~(kSpanPoolingMask | kSpanNormalize)) != 0 || (flags & kSpanPoolingMask) > 2)
      return InvalidArgument(where + " has unknown flags " + std::to_string(flags));
  }
  return Status::Ok();
}

}  // namespace petal
