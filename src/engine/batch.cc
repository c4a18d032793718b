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
  return Status::Ok();
}

}  // namespace petal
