// Internal to gemm_cutlass*.cu: the plain (CUTLASS-free) call each instantiation exposes, so that
// gemm_cutlass.cc dispatches without including CUTLASS. Thread-safety: stateless.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/gemm.h"

namespace petal::cuda::cutlass_gemm {

struct Call {
  const GemmParams* p = nullptr;
  int splits = 0;  // 0 stream-K, 1 data-parallel, > 1 split-K
  int device = 0, sm_count = 0;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

// One pair per token-tile width (gemm_cutlass_t<width>.cu). Supported sets *workspace to the
// bytes the call needs; Launch returns null on success, else what failed.
bool SupportedT64(const Call& call, size_t* workspace);
const char* LaunchT64(const Call& call);
bool SupportedT128(const Call& call, size_t* workspace);
const char* LaunchT128(const Call& call);

}  // namespace petal::cuda::cutlass_gemm
