// Device side of an L2Hint (ops.h): the calling kernel's threads, numbered across the whole grid,
// each issue bulk L2 prefetches for 32 KiB pieces of the hinted bytes. Call it first in the kernel,
// before PdlWait(): the hinted bytes are weights no earlier kernel writes, so the PDL rule (no
// global access before the wait) does not apply to this hint. Thread-safety: stateless.
#pragma once

#include <cstdint>

#include "kernels/cuda/ops.h"

namespace petal::cuda {

__device__ __forceinline__ void IssueL2Hint(const L2Hint& h) {
  if (h.ptr == nullptr) return;
  constexpr size_t kPiece = 32 * 1024;
  const size_t pieces = (h.bytes + kPiece - 1) / kPiece;
  const size_t threads = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < pieces;
       i += threads) {
    const char* p = static_cast<const char*>(h.ptr) + i * kPiece;
    const size_t left = h.bytes - i * kPiece;
    const uint32_t n = static_cast<uint32_t>(left < kPiece ? left : kPiece) & ~15u;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (n > 0)
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(n) : "memory");
#else
    (void)p;
    (void)n;
#endif
  }
}

}  // namespace petal::cuda
