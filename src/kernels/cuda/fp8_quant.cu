// FP8 quantisation kernels (fp8_ops.h): one block per row; the row's fp32 values are staged in
// shared memory (in the conflict-free layout of norm.cu: value j of 8-chunk c at j * dim/8 + c),
// the row's absolute maximum is reduced over the block, and a final pass writes e4m3 values
// (8 per 8-byte store) and the row's scale. A thread only re-reads shared values it wrote itself,
// so the only barriers are those inside the block reductions.
#include <cuda_fp8.h>

#include <cmath>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/fp8_ops.h"
#include "kernels/cuda/launch_utils.h"
#include "kernels/cuda/pdl.cuh"

namespace petal::cuda {
namespace {

constexpr int kVec = 8;

__device__ __forceinline__ int Slot(int i, int j, int dim) { return j * (dim / kVec) + i / kVec; }

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Max over the block, returned to every thread (same rules as BlockSum in device_utils.cuh).
__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < (blockDim.x >> 5) ? scratch[lane] : 0.f;
  return WarpMax(v);
}

// Quantises the staged row (fp32 in shared memory, this thread's chunks) given its amax, or
// with the per-tensor scale *static_scale when that is non-null (amax is then unused).
__device__ __forceinline__ void WriteRow(const float* row, float amax, const float* static_scale,
                                         int dim, fp8* out, float* scale) {
  float inv, s;
  if (static_scale != nullptr) {
    s = *static_scale;
    inv = __frcp_rn(s);  // IEEE round-to-nearest, as 1.f / s on the host
  } else {
    amax = fmaxf(amax, kFp8MinAmax);
    inv = kFp8Max / amax;
    s = amax / kFp8Max;
  }
  if (threadIdx.x == 0) *scale = s;
  for (int i = threadIdx.x * kVec; i < dim; i += blockDim.x * kVec) {
    uint2 raw;
    uint16_t* pairs = reinterpret_cast<uint16_t*>(&raw);
#pragma unroll
    for (int j = 0; j < kVec; j += 2) {
      const float2 v = make_float2(__fmul_rn(row[Slot(i, j, dim)], inv),
                                   __fmul_rn(row[Slot(i, j + 1, dim)], inv));
      pairs[j / 2] = __nv_cvt_float2_to_fp8x2(v, __NV_SATFINITE, __NV_E4M3);
    }
    *reinterpret_cast<uint2*>(out + i) = raw;
  }
}

__global__ void QuantizeRowsKernel(const float* in_f32, const bf16* in_bf16, fp8* out, float* scale,
                                   int dim, const float* static_scale) {
  PdlWait();  // see pdl.cuh: before any global memory access
  extern __shared__ float row[];
  __shared__ float scratch[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * dim;
  float amax = 0.f;
  for (int i = threadIdx.x * kVec; i < dim; i += blockDim.x * kVec) {
    float v[kVec];
    if (in_f32 != nullptr) {
      const float4 a = *reinterpret_cast<const float4*>(in_f32 + base + i);
      const float4 b = *reinterpret_cast<const float4*>(in_f32 + base + i + 4);
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z,
      v[7] = b.w;
    } else {
      LoadBf16<kVec>(in_bf16 + base + i, v);
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      row[Slot(i, j, dim)] = v[j];
      amax = fmaxf(amax, fabsf(v[j]));
    }
  }
  // Static scales need no reduction (and no barrier: each thread re-reads only its own slots).
  if (static_scale == nullptr) amax = BlockMax(amax, scratch);
  WriteRow(row, amax, static_scale, dim, out + base, scale + blockIdx.x);
}

__global__ void AddRmsNormFp8Kernel(AddRmsNormFp8Params p) {
  PdlWait();  // see pdl.cuh: before any global memory access
  extern __shared__ float row[];
  __shared__ float scratch[32];
  const int dim = p.dim;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * dim;
  float sumsq = 0.f;
  for (int i = threadIdx.x * kVec; i < dim; i += blockDim.x * kVec) {
    float v[kVec];
    LoadBf16<kVec>(p.residual + base + i, v);
    if (p.x != nullptr) {
      float w[kVec];
      LoadBf16<kVec>(p.x + base + i, w);
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[j] = RoundBf16(v[j] + w[j]);
      StoreBf16<kVec>(p.residual + base + i, v);
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      row[Slot(i, j, dim)] = v[j];
      sumsq += v[j] * v[j];
    }
  }
  const float inv = rsqrtf(BlockSum(sumsq, scratch) / dim + p.eps);
  float amax = 0.f;
  for (int i = threadIdx.x * kVec; i < dim; i += blockDim.x * kVec) {
    float g[kVec];
    LoadBf16<kVec>(p.weight + i, g);
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float o = row[Slot(i, j, dim)] * inv * g[j];
      row[Slot(i, j, dim)] = o;
      amax = fmaxf(amax, fabsf(o));
    }
  }
  if (p.static_scale == nullptr) amax = BlockMax(amax, scratch);
  WriteRow(row, amax, p.static_scale, dim, p.out + base, p.scale + blockIdx.x);
}

__global__ void SiluMulFp8Kernel(SiluMulFp8Params p) {
  PdlWait();  // see pdl.cuh: before any global memory access
  extern __shared__ float row[];
  __shared__ float scratch[32];
  const int dim = p.inter;
  const bf16* in = p.gate_up + static_cast<int64_t>(blockIdx.x) * 2 * dim;
  float amax = 0.f;
  for (int i = threadIdx.x * kVec; i < dim; i += blockDim.x * kVec) {
    float g[kVec], u[kVec];
    LoadBf16<kVec>(in + i, g);
    LoadBf16<kVec>(in + dim + i, u);
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      // silu(g) = g / (1 + exp(-g)), IEEE expf and division as LaunchSiluMul.
      const float o = g[j] / (1.f + expf(-g[j])) * u[j];
      row[Slot(i, j, dim)] = o;
      amax = fmaxf(amax, fabsf(o));
    }
  }
  if (p.static_scale == nullptr) amax = BlockMax(amax, scratch);
  WriteRow(row, amax, p.static_scale, dim, p.out + static_cast<int64_t>(blockIdx.x) * dim,
           p.scale + blockIdx.x);
}

__global__ void RowAmaxKernel(const bf16* in, float* out, int dim) {
  PdlWait();  // see pdl.cuh: before any global memory access
  __shared__ float scratch[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * dim;
  float amax = 0.f;
  for (int i = threadIdx.x * kVec; i < dim; i += blockDim.x * kVec) {
    float v[kVec];
    LoadBf16<kVec>(in + base + i, v);
#pragma unroll
    for (int j = 0; j < kVec; ++j) amax = fmaxf(amax, fabsf(v[j]));
  }
  amax = BlockMax(amax, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = amax;
}

Status CheckRows(const char* op, int rows, int dim, std::initializer_list<const void*> ptrs) {
  if (rows < 0 || dim <= 0 || dim % 16 != 0 || dim > kMaxNormDim)
    return BadArg(op, "need rows >= 0 and dim a multiple of 16 in (0, 12288], got rows=" +
                          std::to_string(rows) + " dim=" + std::to_string(dim));
  for (const void* ptr : ptrs)
    if (ptr != nullptr && !IsAligned(ptr, 16))
      return BadArg(op, "pointers must be 16-byte aligned");
  return Status::Ok();
}

size_t RowBytes(int dim) { return static_cast<size_t>(dim) * sizeof(float); }

}  // namespace

Status LaunchQuantizeRowsFp8(const QuantizeRowsFp8Params& p, cudaStream_t stream) {
  PETAL_RETURN_IF_ERROR(CheckRows("QuantizeRowsFp8", p.rows, p.dim, {p.in_f32, p.in_bf16, p.out}));
  if ((p.in_f32 == nullptr) == (p.in_bf16 == nullptr) || !p.out || !p.scale)
    return BadArg("QuantizeRowsFp8", "need exactly one input, out and scale");
  if (p.rows == 0) return Status::Ok();
  (void)LaunchPdl(QuantizeRowsKernel, p.rows, RowThreads(p.dim, kVec), RowBytes(p.dim), stream,
                  p.in_f32, p.in_bf16, p.out, p.scale, p.dim, p.static_scale);
  PETAL_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchAddRmsNormFp8(const AddRmsNormFp8Params& p, cudaStream_t stream) {
  PETAL_RETURN_IF_ERROR(
      CheckRows("AddRmsNormFp8", p.rows, p.dim, {p.x, p.residual, p.weight, p.out}));
  if (!p.residual || !p.weight || !p.out || !p.scale)
    return BadArg("AddRmsNormFp8", "need residual, weight, out and scale");
  if (p.rows == 0) return Status::Ok();
  (void)LaunchPdl(AddRmsNormFp8Kernel, p.rows, RowThreads(p.dim, kVec), RowBytes(p.dim), stream, p);
  PETAL_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchSiluMulFp8(const SiluMulFp8Params& p, cudaStream_t stream) {
  PETAL_RETURN_IF_ERROR(CheckRows("SiluMulFp8", p.rows, p.inter, {p.gate_up, p.out}));
  if (!p.gate_up || !p.out || !p.scale) return BadArg("SiluMulFp8", "need gate_up, out, scale");
  if (p.rows == 0) return Status::Ok();
  (void)LaunchPdl(SiluMulFp8Kernel, p.rows, RowThreads(p.inter, kVec), RowBytes(p.inter), stream,
                  p);
  PETAL_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status LaunchRowAmaxBf16(const RowAmaxParams& p, cudaStream_t stream) {
  PETAL_RETURN_IF_ERROR(CheckRows("RowAmaxBf16", p.rows, p.dim, {p.in}));
  if (!p.in || !p.out) return BadArg("RowAmaxBf16", "need in and out");
  if (p.rows == 0) return Status::Ok();
  (void)LaunchPdl(RowAmaxKernel, p.rows, RowThreads(p.dim, kVec), 0, stream, p.in, p.out, p.dim);
  PETAL_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

void QuantizeRowsFp8Host(const float* in, int rows, int dim, uint8_t* q, float* scale) {
  for (int r = 0; r < rows; ++r) {
    const float* v = in + static_cast<int64_t>(r) * dim;
    float amax = 0.f;
    for (int i = 0; i < dim; ++i) amax = std::fmax(amax, std::fabs(v[i]));
    amax = std::fmax(amax, kFp8MinAmax);
    const float inv = kFp8Max / amax;
    scale[r] = amax / kFp8Max;
    for (int i = 0; i < dim; ++i)
      q[static_cast<int64_t>(r) * dim + i] =
          __nv_cvt_float_to_fp8(v[i] * inv, __NV_SATFINITE, __NV_E4M3);
  }
}

void QuantizeRowsFp8StaticHost(const float* in, int rows, int dim, float s, uint8_t* q,
                               float* scale) {
  const float inv = 1.f / s;
  for (int r = 0; r < rows; ++r) {
    scale[r] = s;
    for (int64_t i = static_cast<int64_t>(r) * dim; i < static_cast<int64_t>(r + 1) * dim; ++i)
      q[i] = __nv_cvt_float_to_fp8(in[i] * inv, __NV_SATFINITE, __NV_E4M3);
  }
}

float Fp8ToFloatHost(uint8_t q) {
  __nv_fp8_e4m3 x;
  x.__x = q;
  return static_cast<float>(x);
}

}  // namespace petal::cuda
