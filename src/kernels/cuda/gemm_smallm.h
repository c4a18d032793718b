// Internal to Gemm: our own bf16 GEMM for few tokens (M <= 128), one more candidate for the tuner
// (used only where it measures faster than cuBLASLt and its output agrees with cuBLASLt's; see
// gemm_tune.cc). It streams the weights once with 16-byte loads and multiplies on tensor cores
// (mma.sync m16n8k16, weights as the 16-row side, tokens as the 8-column side), with fp32
// accumulation; `splits` > 1 splits K over blocks, writes fp32 partials to the workspace and
// reduces them (with the epilogue) in a second kernel: deterministic, no atomics.
// Computes Gemm's function: out = epilogue(a w^T + c + bias). Thread-safety: stateless.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "common/status.h"
#include "kernels/cuda/gemm_params.h"

namespace petal::cuda {

constexpr int kSmallMMaxM = 128;

// Whether the kernel handles p (sizes, 16-byte aligned a and w) with `splits` K-splits and a
// workspace of `workspace_bytes` (for the partials when splits > 1).
bool SmallMSupported(const GemmParams& p, int splits, size_t workspace_bytes);

// Enqueues out = epilogue(a w^T + c + bias) on `stream`; requires SmallMSupported.
Status LaunchSmallMGemm(const GemmParams& p, int splits, void* workspace, cudaStream_t stream);

// Relative L2 difference ||x - ref|| / ||ref|| of two bf16 arrays of n elements, and whether x has
// a non-finite value where ref has none. Synchronises `stream` (tuning only); `tmp`: 16 bytes of
// device memory.
Status CompareBf16(const __nv_bfloat16* x, const __nv_bfloat16* ref, size_t n, void* tmp,
                   cudaStream_t stream, double* rel_l2, bool* new_nonfinite);

}  // namespace petal::cuda
