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

// ---- Sparse (SPLADE) compaction ----------------------------------------------------------------
// cpu::SparseCompact: each of `rows` pooled rows (dense[r, v] for v < vocab, rows ld apart) as its
// non-zero entries: counts[r] = how many, and the entries (index v, value dense[r, v]) of every
// value > 0 (NaN is not), indices ascending, at indices[r * stride ...] / values[r * stride ...]
// (stride >= vocab: room for a row whose every entry is non-zero). With top_k (device, [rows],
// may be null) and top_k[r] > 0, row r keeps only its top_k[r] largest values (still in index
// order); among values equal to the k-th largest, the lowest indices are kept. One block per
// row: a radix select (4 passes of 8 bits over the row) finds the k-th largest, then one ordered
// pass (block prefix sums) writes the kept entries. The outputs may be page-locked host memory
// mapped into the device (the CUDA engine writes there, so only the entries cross PCIe).
// Sized by rows (a host value): deterministic; the engine launches it outside graph capture.
struct SparseCompactParams {
  const float* dense = nullptr;  // [rows, ld], every value >= 0 or NaN (SparseMaxPool's output)
  int ld = 0;                    // >= vocab
  int rows = 0, vocab = 0;
  const int32_t* top_k = nullptr;  // [rows] or null: 0 (or null) = every non-zero
  int64_t stride = 0;              // >= vocab
  int32_t* counts = nullptr;       // [rows]
  int32_t* indices = nullptr;      // [rows, stride]
  float* values = nullptr;         // [rows, stride]
};
Status LaunchSparseCompact(const SparseCompactParams& p, cudaStream_t stream);

}  // namespace petal::cuda
