// Gemm's epilogue in device code, shared by our GEMM kernels (gemm_cluster.cu, gemm_wgmma.cu):
// acc + bias + c, then GELU (tanh form, as cuBLASLt's) last. `P` is a kernel's argument struct
// with bias, c (bf16 or null), n and gelu. Thread-safety: device code, stateless.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>

namespace petal::cuda {

template <typename P>
__device__ __forceinline__ float GemmEpilogue(const P& p, float x, int tok, int n) {
  if (p.bias) x += __bfloat162float(p.bias[n]);
  if (p.c) x += __bfloat162float(p.c[static_cast<size_t>(tok) * p.n + n]);
  if (p.gelu) x = 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  return x;
}

}  // namespace petal::cuda
