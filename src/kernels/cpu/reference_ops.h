// Named CPU references for the CUDA ops of kernels/cuda/ops.h that are not CPU-engine building
// blocks themselves (those are in ops.h: SiluMul, Gelu, Pool, LayerNorm, RmsNorm, Rope). Each
// computes, in fp32 on the host, exactly the function its CUDA op documents; where the CUDA op
// rounds an intermediate to bf16, `round` is applied at that point (pass RoundBf16 from
// kernels/cpu/bf16.h for the bf16 engine, or null for none). They are slow, plain loops: used by
// the CUDA op-test harness (tests/ops/op_harness.h) and unit-tested against float64 loops.
// Thread-safety: pure functions over caller-owned buffers.
#pragma once

#include <cstdint>

#include "kernels/cpu/ops.h"

namespace petal::cpu {

using RoundFn = float (*)(float);

// cuda::LaunchSeqInfo: for t < rows, seq_ids[t] = s with cu_seqlens[s] <= t < cu_seqlens[s+1]
// and positions[t] = t - cu_seqlens[s]; tokens past cu_seqlens[num_seqs] get -1 and 0. Either
// output may be null.
void SeqInfo(const int32_t* cu_seqlens, int num_seqs, int rows, int32_t* seq_ids,
             int32_t* positions);

// cuda::LaunchNormalizeRows: out[r,:] = x[r,:] / max(||x[r,:]||, 1e-12) (the norm in fp32;
// a multi-vector model's per-token normalisation, TokenProjection::Apply's last step).
void L2NormalizeRows(const float* x, int rows, int dim, float* out);

// cuda::LaunchEmbedding: out[t,:] = table[ids[t],:]; an id outside [0, vocab) gives zeros.
void Embedding(const int32_t* ids, const float* table, int vocab, float* out, int rows, int dim);

// cuda::LaunchBertEmbedding: out[t,:] = LayerNorm(word[ids[t]] + pos[positions[t] + offset] +
// type[type_ids[t]]) * gamma + beta, the sum in fp32; type_ids null means type 0; out-of-range
// ids, positions and types are clamped into range.
void BertEmbedding(const int32_t* ids, const int32_t* positions, const int32_t* type_ids,
                   const float* word, const float* pos, const float* type, int vocab,
                   int max_positions, int num_types, int position_offset, const float* gamma,
                   const float* beta, float eps, float* out, int rows, int dim);

// cuda::LaunchAddLayerNorm: out = LayerNorm(round(x + residual)) * gamma + beta; residual null
// means LayerNorm(x). out may alias x or residual.
void AddLayerNorm(const float* x, const float* residual, const float* gamma, const float* beta,
                  float eps, float* out, int rows, int dim, RoundFn round);

// cuda::LaunchAddRmsNorm: if x != null, residual = round(residual + x) (written back); then
// out = RmsNorm(residual) * weight. With x == null out may alias residual.
void AddRmsNorm(const float* x, float* residual, const float* weight, float eps, float* out,
                int rows, int dim, RoundFn round);

// cuda::LaunchQkNormRope, in place on qkv rows [q heads | k heads | v ...] (row stride
// row_stride): per q/k head, RmsNorm with q_norm_weight / k_norm_weight (both null: none), then,
// if positions != null, rotate-half rotary at positions[t] with inv_freq[j] =
// theta^(-2j/head_dim), angles in fp64. v is untouched.
void QkNormRope(float* qkv, int rows, int row_stride, int num_q_heads, int num_kv_heads,
                int head_dim, const float* q_norm_weight, const float* k_norm_weight, float eps,
                const int32_t* positions, double theta);

// The folded-RMSNorm consumers (cuda::LaunchRmsScaledQkv / LaunchRmsScaledSiluMul; ops.h there
// says why): s_t = 1 / sqrt(mean(r[t, 0:r_dim]^2) + r_eps) in double. RmsScaledQkv: every value of
// the q, k and v heads of row t becomes s_t * x + bias[col] (bias may be null), then QkNormRope
// above. RmsScaledSiluMul: out[t,i] = silu(s_t gate[t,i]) * (s_t up[t,i]).
void RmsScaledQkv(float* qkv, int rows, int row_stride, int num_q_heads, int num_kv_heads,
                  int head_dim, const float* r, int r_dim, float r_eps, const float* bias,
                  const float* q_norm_weight, const float* k_norm_weight, float eps,
                  const int32_t* positions, double theta);
void RmsScaledSiluMul(const float* gate_up, const float* r, int r_dim, float r_eps, float* out,
                      int rows, int inter);

// cuda::LaunchPool: out[s, 0:out_dims] = Pool(hidden rows of sequence s, first out_dims
// features) in fp32, optionally L2-normalised over those out_dims (x / max(||x||, 1e-12));
// out_dims == 0 means dim. Empty sequences give zeros. out is [num_seqs, out_dims].
void PoolDims(const float* hidden, const int32_t* cu_seqlens, int num_seqs, int dim, int out_dims,
              Pooling mode, bool normalize, float* out);

// cuda::LaunchDenseRows: y[r, o] = act(sum_k x[r, k] * w[o, k] + bias[o]) with act tanh (when
// `tanh`) or identity, accumulated in fp32 in k order; bias may be null. x rows are x_stride apart.
void DenseRows(const float* x, int x_stride, const float* w, const float* bias, bool tanh, float* y,
               int rows, int out, int in);

// cuda::LaunchSparseMaxPool (SPLADE pooling of one token chunk): for each sequence s and
// v < vocab, out[s, v] = max(out[s, v], log1p(logits[t - row0, v])) over the tokens t of s in
// [row0, row0 + rows) whose logit is > 0. logits rows are ld apart; out is [num_seqs, vocab].
void SparseMaxPool(const float* logits, int ld, int row0, int rows, int vocab,
                   const int32_t* cu_seqlens, int num_seqs, float* out);

// cuda::LaunchSparseCompact (a pooled SPLADE row to its non-zero entries): for each row r of
// dense (rows ld apart), counts[r] entries (v, dense[r, v]) with value > 0, indices ascending,
// written at indices / values + r * stride. top_k may be null; top_k[r] > 0 keeps the row's
// top_k[r] largest values only (ties at the k-th largest: the lowest indices), in index order.
void SparseCompact(const float* dense, int ld, int rows, int vocab, const int32_t* top_k,
                   int64_t stride, int32_t* counts, int32_t* indices, float* values);

}  // namespace petal::cpu
