// CUDA ops of the model heads after the encoder: ranking models' score heads and SPLADE's sparse
// pooling (beside ops.h, as fp8_ops.h is; same conventions: Params struct + stateless launcher,
// graph-safe, never allocates or synchronises).
// Thread-safety: launchers are stateless.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/status.h"

namespace petal::cuda {

using bf16 = __nv_bfloat16;

// ---- Score heads -------------------------------------------------------------------------------
// A small dense layer on fp32 rows (cpu::DenseRows): y[r, o] = act(sum_k x[r, k] * w[o, k] +
// bias[o]) for r < rows, o < out, with act = tanh or identity; fp32 accumulation of the bf16
// weights, no intermediate rounding; y fp32. For ranking heads on pooled states (rows = sequences:
// BERT's pooler + classifier, XLM-R's dense + out_proj, an LM reranker's yes/no rows), where M is
// far too small for a tuned GEMM to matter. One warp per output element; deterministic.
struct DenseRowsParams {
  const float* x = nullptr;    // [rows, x_stride]
  int x_stride = 0;            // >= in
  const bf16* w = nullptr;     // [out, in]
  const bf16* bias = nullptr;  // [out] or null
  bool tanh = false;
  float* y = nullptr;  // [rows, out]
  int rows = 0, out = 0, in = 0;
};
Status LaunchDenseRows(const DenseRowsParams& p, cudaStream_t stream);

// ---- Sparse (SPLADE) pooling -------------------------------------------------------------------
// One chunk of a batch's MLM logits (cpu::SparseMaxPool): for every sequence s and vocabulary
// entry v < vocab, out[s, v] = max(out[s, v], log1p(max(0, logits[t - row0, v]))) over the tokens
// t of s (cu_seqlens, device memory) that lie in [row0, row0 + rows). Called once per token
// chunk on an `out` zeroed before the first, it leaves SpladePooling's max over each sequence
// of log(1 + relu(logit)), in fp32 from bf16 logits (the max of the raw logits is taken first:
// log1p is monotonic). Tokens past cu_seqlens[num_seqs] (bucket padding) are ignored. out's
// values are >= 0, so blocks merge their maxima with an integer atomicMax on the float bits:
// deterministic. Grid: vocab tiles x 64-token slices of the chunk, all plan-time sizes.
struct SparseMaxPoolParams {
  const bf16* logits = nullptr;  // [rows, ld]: row i is token row0 + i of the batch
  int ld = 0;                    // >= vocab (the decoder's rows padded to a multiple of 8)
  int row0 = 0, rows = 0;
  int vocab = 0;
  const int32_t* cu_seqlens = nullptr;  // [num_seqs + 1], device
  int num_seqs = 0;
  float* out = nullptr;  // [num_seqs, vocab], fp32, every value >= 0 on entry
};
Status LaunchSparseMaxPool(const SparseMaxPoolParams& p, cudaStream_t stream);

}  // namespace petal::cuda
