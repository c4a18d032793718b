// Device-side helpers shared by the kernels in this folder: bf16 vector loads/stores converting
// to fp32 registers, and warp/block sum reductions. Header-only, included by .cu files only.
// Thread-safety: pure device functions; BlockSum uses a caller-provided __shared__ scratch.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace petal::cuda {

using bf16 = __nv_bfloat16;

// The raw type moved by one access of kVec bf16 values: 8 -> 16 bytes, 4 -> 8, 2 -> 4.
template <int kVec>
struct VecRaw;
template <>
struct VecRaw<8> {
  using Type = uint4;
};
template <>
struct VecRaw<4> {
  using Type = uint2;
};
template <>
struct VecRaw<2> {
  using Type = uint32_t;
};

// Loads kVec consecutive bf16 at p (aligned to kVec * 2 bytes) into fp32 registers.
template <int kVec>
__device__ __forceinline__ void LoadBf16(const bf16* p, float (&v)[kVec]) {
  using Raw = typename VecRaw<kVec>::Type;
  const Raw raw = *reinterpret_cast<const Raw*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < kVec / 2; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}

// Stores kVec fp32 values rounded to nearest-even bf16 at p (aligned to kVec * 2 bytes).
template <int kVec>
__device__ __forceinline__ void StoreBf16(bf16* p, const float (&v)[kVec]) {
  using Raw = typename VecRaw<kVec>::Type;
  Raw raw;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < kVec / 2; ++i) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
  *reinterpret_cast<Raw*>(p) = raw;
}

// x rounded to bf16 and back: what PyTorch's bf16 tensors hold after an elementwise op.
__device__ __forceinline__ float RoundBf16(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the whole block, returned to every thread. blockDim.x must be a multiple of 32 and
// every thread must call it (it contains __syncthreads). scratch: __shared__ float[32], reusable
// across consecutive calls (the leading barrier protects it).
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int num_warps = blockDim.x >> 5;
  v = WarpSum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < num_warps ? scratch[lane] : 0.f;
  return WarpSum(v);
}

}  // namespace petal::cuda
