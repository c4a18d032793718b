// Internal to gemm_cutlass*.cu: the plain (CUTLASS-free) call each instantiation exposes, so that
// gemm_cutlass.cc dispatches without including CUTLASS. Thread-safety: stateless.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/gemm_params.h"

namespace petal::cuda::cutlass_gemm {

struct Call {
  const GemmParams* p = nullptr;
  int splits = 0;  // 0 stream-K, 1 data-parallel, > 1 split-K
  int device = 0, sm_count = 0;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
  bool pdl = false;  // launch with the PDL attribute (PETAL_PDL=1): waits in the load warps
};

// One pair per configuration: 128-feature cooperative tiles (gemm_cutlass_t<tokens>.cu). Supported
// sets *workspace to the bytes the call needs; Launch returns null on success, else what failed.
bool SupportedT64(const Call& call, size_t* workspace);
const char* LaunchT64(const Call& call);
bool SupportedT128(const Call& call, size_t* workspace);
const char* LaunchT128(const Call& call);
// 64-feature pingpong tiles (gemm_cutlass_p<width>.cu), data-parallel only.
bool SupportedP64(const Call& call, size_t* workspace);
const char* LaunchP64(const Call& call);
bool SupportedP128(const Call& call, size_t* workspace);
const char* LaunchP128(const Call& call);

}  // namespace petal::cuda::cutlass_gemm
