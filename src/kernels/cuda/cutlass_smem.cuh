// Internal to the CUTLASS instantiations (gemm_cutlass_kernel.cuh, gemm_fused_kernel.cuh): a
// kernel whose shared memory exceeds the 48 KiB default needs its limit raised once, outside
// graph capture, before its first launch. Thread-safety: once per kernel type (std::call_once).
#pragma once

#include <cuda_runtime.h>
#include <cutlass/device_kernel.h>

#include <mutex>

namespace petal::cuda {

// True once the limit of cutlass::device_kernel<GemmKernel> covers its SharedStorageSize.
template <class GemmKernel>
bool RaiseSmemLimitOnce() {
  static std::once_flag once;
  static cudaError_t err = cudaSuccess;
  std::call_once(once, [] {
    const int smem = static_cast<int>(GemmKernel::SharedStorageSize);
    if (smem >= (48 << 10))
      err = cudaFuncSetAttribute(cutlass::device_kernel<GemmKernel>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  });
  return err == cudaSuccess;
}

}  // namespace petal::cuda
