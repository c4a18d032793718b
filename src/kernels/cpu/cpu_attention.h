// Blocked ragged attention for the fast CPU path: the same function as cpu::Attention (ops.h:
// softmax(q k^T * scale) v per sequence and head, grouped-query heads, optional causal mask) but
// computed over blocks of 32 queries x 128 keys with an online softmax (running max and sum per
// query, the output rescaled when the max grows), so no [L, L] score matrix is ever held: memory
// is O(block) per thread whatever the sequence length. Work items are (sequence, head, query
// block), shared by the OpenMP threads. Thread-safety: a pure function over caller buffers.
#pragma once

#include <cstdint>

namespace petal::cpu {

// Arguments as cpu::Attention. Results equal it to float rounding (the sums are ordered
// differently): |difference| <= 1e-5 * max|v| in the tests.
void BlockedAttention(const float* q, int q_stride, const float* k, int k_stride, const float* v,
                      int v_stride, float* out, const int32_t* cu_seqlens, int num_seqs,
                      int num_heads, int num_kv_heads, int head_dim, bool causal, float scale,
                      const int32_t* kv_lens = nullptr);

}  // namespace petal::cpu
