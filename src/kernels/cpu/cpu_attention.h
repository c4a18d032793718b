// Blocked ragged attention for the fast CPU path: the same function as cpu::Attention (ops.h:
// softmax(q k^T * scale) v per sequence and head, grouped-query heads, optional causal mask) but
// computed over blocks of 32 queries x 128 keys with an online softmax (running max and sum per
// query, the output rescaled when the max grows), so no [L, L] score matrix is ever held: memory
// is O(block) per thread whatever the sequence length. Work items are (sequence, kv head, query
// range), shared by the OpenMP threads. Two variants: fp32 (BlockedAttention, AVX2 tiles) and
// bf16 (BlockedAttentionBf16, cpu_attention_bf16.cc: AVX512-BF16 dot products, fp32 softmax and
// accumulation), the latter for the bf16 path, picked at run time from DetectCpuFeatures() (so
// PETAL_CPU_ISA caps it) with the fp32 variant as its fallback.
// Thread-safety: pure functions over caller buffers.
#pragma once

#include <cstdint>
#include <vector>

namespace petal::cpu {

// Arguments as cpu::Attention. Results equal it to float rounding (the sums are ordered
// differently): |difference| <= 1e-5 * max|v| in the tests.
void BlockedAttention(const float* q, int q_stride, const float* k, int k_stride, const float* v,
                      int v_stride, float* out, const int32_t* cu_seqlens, int num_seqs,
                      int num_heads, int num_kv_heads, int head_dim, bool causal, float scale,
                      const int32_t* kv_lens = nullptr);

// Whether BlockedAttentionBf16 runs its AVX512-BF16 kernel for this head size on this CPU (after
// the PETAL_CPU_ISA cap): avx512_bf16 and head_dim a multiple of 32, at most 256.
bool HaveBf16Attention(int head_dim);

// The same attention with q, k and v rounded to bf16 (round to nearest even) as they are packed,
// q.k and p.v as bf16 dot products (VDPBF16PS) with fp32 accumulation, the online softmax in
// fp32 and its probabilities rounded to bf16 for p.v (the row sums are of the rounded values, so
// each output is an exact convex combination of the rounded values). Writes the output in fp32
// to `out` and/or rounded to bf16 to `out_bf16` (either may be null): the bf16 one is the next
// bf16 GEMM's input. Without HaveBf16Attention(head_dim) it runs BlockedAttention (fp32) instead.
void BlockedAttentionBf16(const float* q, int q_stride, const float* k, int k_stride,
                          const float* v, int v_stride, float* out, uint16_t* out_bf16,
                          const int32_t* cu_seqlens, int num_seqs, int num_heads, int num_kv_heads,
                          int head_dim, bool causal, float scale, const int32_t* kv_lens = nullptr);
// The same on q, k and v already in bf16 (e.g. a bf16 GEMM's output): equal to the fp32-input
// call on the same values widened to fp32, since those round to themselves.
void BlockedAttentionBf16(const uint16_t* q, int q_stride, const uint16_t* k, int k_stride,
                          const uint16_t* v, int v_stride, float* out, uint16_t* out_bf16,
                          const int32_t* cu_seqlens, int num_seqs, int num_heads, int num_kv_heads,
                          int head_dim, bool causal, float scale, const int32_t* kv_lens = nullptr);

// The work items both variants share: queries [q0, q1) of every query head of kv_head in
// sequence seq. Each item packs the keys and values its queries see once (kept hot in L2 for
// every query head of the group); ranges are multiples of 32 queries, cut only as far as needed
// to give each of `threads` threads ~4 items.
struct AttentionItem {
  int seq, kv_head, q0, q1;
};
std::vector<AttentionItem> AttentionItems(const int32_t* cu_seqlens, int num_seqs, int num_kv_heads,
                                          int threads);

}  // namespace petal::cpu
