// CUDA ops of the bf16 engine (everything but attention and GEMM, see attention*.h and gemm.h).
//
// Each op is a plain Params struct plus a host launcher `Status LaunchXxx(const XxxParams&,
// cudaStream_t)` that enqueues the kernel(s) on the stream and returns at once. The function
// computed is the CPU reference op of the same name in kernels/cpu/ops.h, with bf16 storage and
// fp32 arithmetic; differences (where intermediate results are rounded to bf16) are documented
// per op. Graph safety: launch configurations depend only on plan-time sizes (rows = token
// capacity of the batch bucket, num_seqs, dims); everything that varies per batch (token ids,
// cu_seqlens, positions) is read from device memory, so a captured graph can be replayed with new
// contents in the same buffers. Launchers never allocate or synchronise. Layouts are row-major,
// activations [rows, features]. Dims must be even; a 16-byte vectorised path is used when dims are
// multiples of 8 and pointers 16-byte aligned. Thread-safety: launchers are stateless.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "kernels/cpu/ops.h"

namespace petal::cuda {

using bf16 = __nv_bfloat16;

// ---- Per-token sequence info -------------------------------------------------------------------
// For t < rows: seq_ids[t] = s with cu_seqlens[s] <= t < cu_seqlens[s+1] and positions[t] = t -
// cu_seqlens[s]; tokens past cu_seqlens[num_seqs] (bucket padding) get seq_id -1, position 0.
// Computed once per batch on device (binary search over cu_seqlens) and shared by rope and the
// BERT embedding. Either output may be null.
struct SeqInfoParams {
  const int32_t* cu_seqlens = nullptr;  // [num_seqs + 1], device, cu_seqlens[0] == 0
  int num_seqs = 0;
  int rows = 0;  // token capacity: entries written in seq_ids / positions
  int32_t* seq_ids = nullptr;
  int32_t* positions = nullptr;
};
Status LaunchSeqInfo(const SeqInfoParams& p, cudaStream_t stream);

// ---- Embeddings --------------------------------------------------------------------------------
// out[t,:] = table[ids[t], :] (Qwen3). An id outside [0, vocab) gives a zero row (no OOB read).
struct EmbeddingParams {
  const int32_t* ids = nullptr;  // [rows]
  const bf16* table = nullptr;   // [vocab, dim]
  int vocab = 0;
  bf16* out = nullptr;  // [rows, dim]
  int rows = 0;
  int dim = 0;
};
Status LaunchEmbedding(const EmbeddingParams& p, cudaStream_t stream);

// BERT: out[t,:] = LayerNorm(word[ids[t]] + pos[positions[t] + position_offset] + type[tt[t]]),
// the three-way sum in fp32 (not rounded in between), LayerNorm as cpu::LayerNorm.
// type_ids == nullptr means type 0 for every token. Out-of-range ids/positions/types are clamped
// into range (never read out of bounds); garbage in, garbage out, but no fault.
struct BertEmbeddingParams {
  const int32_t* ids = nullptr;        // [rows]
  const int32_t* positions = nullptr;  // [rows], e.g. SeqInfoParams::positions
  const int32_t* type_ids = nullptr;   // [rows] or null
  const bf16* word = nullptr;          // [vocab, dim]
  const bf16* pos = nullptr;           // [max_positions, dim]
  const bf16* type = nullptr;          // [num_types, dim]
  int vocab = 0, max_positions = 0, num_types = 0;
  int position_offset = 0;  // 0 for BERT; RoBERTa-style models use padding_idx + 1
  const bf16* gamma = nullptr;
  const bf16* beta = nullptr;  // [dim] each
  float eps = 1e-12f;
  bf16* out = nullptr;  // [rows, dim]
  int rows = 0;
  int dim = 0;
  int rows_per_block = 0;  // kernel layout (see "rows_per_block" after LaunchAddRmsNorm)
};
Status LaunchBertEmbedding(const BertEmbeddingParams& p, cudaStream_t stream);

// ---- Norms -------------------------------------------------------------------------------------
// BERT post-LN: out = LayerNorm(bf16(x + residual)) * gamma + beta (residual may be null: LN(x)).
// The sum is rounded to bf16 first, as PyTorch's bf16 add does. out may alias x or residual.
// dim <= 12288.
struct AddLayerNormParams {
  const bf16* x = nullptr;         // [rows, dim]
  const bf16* residual = nullptr;  // [rows, dim] or null
  const bf16* gamma = nullptr;
  const bf16* beta = nullptr;  // [dim]
  float eps = 1e-12f;
  bf16* out = nullptr;  // [rows, dim]
  int rows = 0;
  int dim = 0;
  int rows_per_block = 0;  // kernel layout (see "rows_per_block" after LaunchAddRmsNorm)
};
Status LaunchAddLayerNorm(const AddLayerNormParams& p, cudaStream_t stream);

// Qwen3 pre-norm: if x != null, residual = bf16(residual + x) (written back); then
// out = RmsNorm(residual) * weight (cpu::RmsNorm). With x == null this is a plain RMSNorm of
// residual (first layer, final norm) and out may alias residual; with x != null out must not
// alias residual or x. dim <= 12288.
struct AddRmsNormParams {
  const bf16* x = nullptr;       // [rows, dim] or null
  bf16* residual = nullptr;      // [rows, dim], updated in place when x != null
  const bf16* weight = nullptr;  // [dim]
  float eps = 1e-6f;
  bf16* out = nullptr;  // [rows, dim]
  int rows = 0;
  int dim = 0;
  int rows_per_block = 0;  // kernel layout (see "rows_per_block" after LaunchAddRmsNorm)
};
Status LaunchAddRmsNorm(const AddRmsNormParams& p, cudaStream_t stream);

// rows_per_block, the norms' (and BertEmbedding's) kernel layout: 1 = one block per row, the row
// staged in shared memory (any dim); 2, 4 or 8 = one warp per row and that many rows a block, the
// row in registers (dim a multiple of 8 up to 1024 with 16-byte aligned pointers, else 1 is used):
// fewer, longer blocks for rows too short to keep a block busy. 0 = the process default:
// PETAL_NORM_ROWS_PER_BLOCK when set to one of those values, else 4 for dim <= 512 and 1 above.
// Measured (H100, session 26): 4 rows a block made MiniLM-L6 (dim 384) 1024 x 128 4.8% faster and
// the Qwen3 0.6B (dim 1024) 1 x 128 4.8% slower than 1.

// ---- Qwen3 q/k norm + rotary, in place on the fused QKV rows -----------------------------------
// Row layout [q (num_q_heads*head_dim) | k (num_kv_heads*head_dim) | v ...] with row stride
// row_stride elements. For every token t < rows and every q and k head: if norm weights are given,
// x = RmsNorm(x) * w (q_norm_weight for q heads, k_norm_weight for k heads, per head over
// head_dim); then, if positions != null, rotate-half rotary at positions[t] with inv_freq[j] =
// theta^(-2j/head_dim) (cpu::Rope). v is untouched. Angles are reduced in fp64, so accuracy does
// not degrade at 32K positions. head_dim even and <= 512.
struct QkNormRopeParams {
  bf16* qkv = nullptr;
  int rows = 0;
  int row_stride = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  const bf16* q_norm_weight = nullptr;  // [head_dim]; both null: no norm
  const bf16* k_norm_weight = nullptr;  // [head_dim]
  float eps = 1e-6f;
  const int32_t* positions = nullptr;  // [rows]; null: no rotary
  double theta = 1e6;
  // Optional precomputed rotary table: rope_table[pos * head_dim/2 + j] = (cos, sin) of
  // pos * inv_freq[j], computed once in fp64 (RopeTable below). With it the kernel does a gather
  // instead of per-element fp64 math (5x faster at the 0.6b shape); positions are clamped to
  // rope_table_rows - 1. Null: angles computed in fp64 in the kernel.
  const float2* rope_table = nullptr;
  int rope_table_rows = 0;
  // Heads one warp processes (the vectorised kernel only: head_dim 64/128/256 with a table or no
  // rotary): 1 or 4; 0 picks by batch size (4 from 1,024 rows). Same results either way.
  int heads_per_warp = 0;
};

// Host-side (cos, sin) table for LaunchQkNormRope: rows positions x head_dim/2 pairs, in fp64
// rounded to fp32, with inv_freq[j] = theta^(-2j/head_dim) (cpu::Rope's convention).
std::vector<float2> RopeTable(int rows, int head_dim, double theta);
Status LaunchQkNormRope(const QkNormRopeParams& p, cudaStream_t stream);

// ---- Activations -------------------------------------------------------------------------------
// SwiGLU (cpu::SiluMul): out[r,i] = silu(gate_up[r,i]) * gate_up[r, inter + i], one rounding.
struct SiluMulParams {
  const bf16* gate_up = nullptr;  // [rows, 2 * inter]
  bf16* out = nullptr;            // [rows, inter]
  int rows = 0;
  int inter = 0;
};
Status LaunchSiluMul(const SiluMulParams& p, cudaStream_t stream);

// ---- RMSNorm folded into the next GEMM (rms_fold.cu; the Qwen3 bf16 forward) -------------------
// A pre-norm x = RmsNorm(r) * g that only feeds a GEMM is folded into it: g goes into the GEMM's
// weights at load (LaunchScaleColumns: W' = W diag(g)), the GEMM reads r itself, and since
// x W^T = s_t * (r W'^T)[t] with s_t = rsqrt(mean(r[t,:]^2) + eps), the kernel that consumes the
// GEMM's output applies s_t, computed from r in the same kernel. No norm kernel, no x buffer.

// w[n, k] = bf16(w[n, k] * scale[k]) for a [rows, cols] row-major bf16 matrix, in place.
struct ScaleColumnsParams {
  bf16* w = nullptr;
  const bf16* scale = nullptr;  // [cols]
  int64_t rows = 0;
  int cols = 0;
};
Status LaunchScaleColumns(const ScaleColumnsParams& p, cudaStream_t stream);

// The QKV GEMM's consumer: for every token t < qk.rows, every value of its q, k and v heads
// (v heads follow the k heads, num_kv_heads of them) becomes s_t * x + bias (bias per column, or
// none), rounded once; then the q and k heads get QkNormRope's norm and rotary (rope_table
// required when positions are given). head_dim 64, 128 or 256; rms_dim a multiple of 8.
struct RmsScaledQkvParams {
  QkNormRopeParams qk;
  const bf16* rms_of = nullptr;  // r [qk.rows, rms_dim]: the source of s_t
  int rms_dim = 0;
  float rms_eps = 1e-6f;
  const bf16* bias = nullptr;  // [(num_q_heads + 2 num_kv_heads) * head_dim] or null
};
Status LaunchRmsScaledQkv(const RmsScaledQkvParams& p, cudaStream_t stream);

// The gate/up GEMM's consumer: out[t,i] = silu(s_t * gate[t,i]) * (s_t * up[t,i]), one rounding.
struct RmsScaledSiluMulParams {
  SiluMulParams mul;
  const bf16* rms_of = nullptr;  // r [mul.rows, rms_dim]
  int rms_dim = 0;
  float rms_eps = 1e-6f;
};
Status LaunchRmsScaledSiluMul(const RmsScaledSiluMulParams& p, cudaStream_t stream);

// Exact GELU (cpu::Gelu, erf form) over n values; out may alias x. Kept separate from the GEMM
// because cuBLASLt's GELU epilogue is the tanh approximation (see gemm.h).
struct GeluParams {
  const bf16* x = nullptr;
  bf16* out = nullptr;
  int64_t n = 0;
};
Status LaunchGelu(const GeluParams& p, cudaStream_t stream);

// Multi-vector (ColBERT) token vectors: out[r, :] = x[r, :] / max(||x[r, :]||, 1e-12), fp32 math
// and output from bf16 rows (cpu::L2NormalizeRows on the bf16 values). One warp per row; `rows`
// sizes the grid (pass the bucket's token count under graph capture).
struct NormalizeRowsParams {
  const bf16* x = nullptr;  // [rows, dim]
  float* out = nullptr;     // [rows, dim]
  int rows = 0;
  int dim = 0;
};
Status LaunchNormalizeRows(const NormalizeRowsParams& p, cudaStream_t stream);

// ---- Pooling -----------------------------------------------------------------------------------
// out[s, 0:out_dims] = pool(hidden[cu_seqlens[s]:cu_seqlens[s+1], 0:out_dims]) in fp32, then
// optionally L2-normalised over those out_dims (x / max(||x||, 1e-12)): cpu::Pool on the
// truncated features (Matryoshka). Empty sequences give zeros. Lengths come from device memory;
// one block per sequence. out_dims == 0 means dim.
struct PoolParams {
  const bf16* hidden = nullptr;         // [tokens, dim]
  const int32_t* cu_seqlens = nullptr;  // [num_seqs + 1], device
  int num_seqs = 0;
  int dim = 0;
  int out_dims = 0;
  cpu::Pooling mode = cpu::Pooling::kMean;
  bool normalize = false;
  float* out = nullptr;  // [num_seqs, out_dims], fp32
};
Status LaunchPool(const PoolParams& p, cudaStream_t stream);

// Span pooling (late chunking, windowed long inputs): out[i, 0:out_dims] = cpu::PoolSpans row i
// (kernels/cpu/span_pool.h) on the truncated features: span i = spans[3i .. 3i+2] = start, end
// (absolute token rows of hidden), flags (pooling | 0x100 normalise), all in device memory, so a
// captured graph serves any spans of its span-count bucket; an empty span (start >= end, e.g.
// the padding of that bucket) gives zeros. One block per span.
struct PoolSpansParams {
  const bf16* hidden = nullptr;    // [tokens, dim]
  const int32_t* spans = nullptr;  // [num_spans * 3], device
  int num_spans = 0;
  int dim = 0;
  int out_dims = 0;      // 0 = dim
  float* out = nullptr;  // [num_spans, out_dims], fp32
};
Status LaunchPoolSpans(const PoolSpansParams& p, cudaStream_t stream);

// ---- Conversions (weight upload, results) ------------------------------------------------------
// out[i] = bf16_rne(in[i]) / float(in[i]) for i < n; any n, any alignment.
Status LaunchF32ToBf16(const float* in, bf16* out, int64_t n, cudaStream_t stream);
Status LaunchBf16ToF32(const bf16* in, float* out, int64_t n, cudaStream_t stream);

}  // namespace petal::cuda
