// CUDA ops of ranking models' score heads (beside ops.h, as fp8_ops.h is; same conventions:
// Params struct + stateless launcher, graph-safe, never allocates or synchronises).
// Thread-safety: launchers are stateless.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

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

}  // namespace petal::cuda
