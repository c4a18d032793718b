// Small-M GEMM (see gemm_smallm.h). Layout of the work: a block has 4 warps, each owning 16 rows
// of w (output features) and the block's token tile of 8*J tokens; grid = (N / 64, splits,
// token tiles). K is walked in chunks of 128: per chunk a lane loads 16 bytes from each of its two
// weight rows (g and g+8) at 4 depths, then for each 8-token block 16 bytes of activations.
//
// Fragment trick: mma m16n8k16 wants lane (g = lane/4, t = lane%4) to hold A[g][2t..2t+1],
// A[g+8][2t..2t+1], A[g][2t+8..2t+9], A[g+8][2t+8..2t+9] and B[2t..2t+1][g], B[2t+8..2t+9][g]
// (k as the 16-deep index). A dot product does not care in which order k is visited, as long as
// A and B agree: we let "logical" k {2t, 2t+1, 2t+8, 2t+9} of an MMA be the physical k
// {8t, .., 8t+3} of a 32-deep step (and the second MMA take 8t+4 .. 8t+7), so one 16-byte load
// feeds two MMAs for each operand, for weights and activations alike, with no shuffles.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm_smallm.h"

namespace petal::cuda {
namespace {

constexpr int kWarps = 4, kRowsPerBlock = 16 * kWarps, kChunk = 128;

struct Args {
  const __nv_bfloat16* a;
  const __nv_bfloat16* w;
  const __nv_bfloat16* bias;  // or null
  const __nv_bfloat16* c;     // or null; may equal out
  __nv_bfloat16* out;
  float* partial;  // [splits][m][n] when splits > 1, else null
  int m, n, k, splits;
  bool gelu;
};

__device__ __forceinline__ void Mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                    uint32_t a3, uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The epilogue of Gemm: epilogue(acc + c + bias), GELU (tanh form, as cuBLASLt's) last.
__device__ __forceinline__ float Epilogue(const Args& p, float x, int tok, int n) {
  if (p.bias) x += __bfloat162float(p.bias[n]);
  if (p.c) x += __bfloat162float(p.c[static_cast<size_t>(tok) * p.n + n]);
  if (p.gelu) x = 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
  return x;
}

template <int J>  // token blocks of 8 per tile
__global__ void __launch_bounds__(32 * kWarps) SmallMKernel(const Args p) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int n0 = blockIdx.x * kRowsPerBlock + (threadIdx.x / 32) * 16;
  const int z = blockIdx.y, m0 = blockIdx.z * 8 * J;
  const int chunks = p.k / kChunk;
  const int c_begin = z * chunks / p.splits, c_end = (z + 1) * chunks / p.splits;

  const __nv_bfloat16* w_lo = p.w + static_cast<size_t>(n0 + g) * p.k + 8 * t;
  const __nv_bfloat16* w_hi = w_lo + static_cast<size_t>(8) * p.k;
  const __nv_bfloat16* a_row[J];
  bool a_ok[J];
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const int tok = m0 + 8 * j + g;
    a_ok[j] = tok < p.m;
    a_row[j] = p.a + static_cast<size_t>(a_ok[j] ? tok : 0) * p.k + 8 * t;
  }
  float acc[J][4] = {};

  for (int ch = c_begin; ch < c_end; ++ch) {
    const int k0 = ch * kChunk;
    uint4 wl[4], wh[4];
    // Weights are read once: streaming loads, so they do not evict the activations from L1/L2.
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      wl[u] = __ldcs(reinterpret_cast<const uint4*>(w_lo + k0 + 32 * u));
      wh[u] = __ldcs(reinterpret_cast<const uint4*>(w_hi + k0 + 32 * u));
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
#pragma unroll
      for (int j = 0; j < J; ++j) {
        uint4 b = make_uint4(0, 0, 0, 0);
        if (a_ok[j]) b = __ldg(reinterpret_cast<const uint4*>(a_row[j] + k0 + 32 * u));
        Mma(acc[j], wl[u].x, wh[u].x, wl[u].y, wh[u].y, b.x, b.y);
        Mma(acc[j], wl[u].z, wh[u].z, wl[u].w, wh[u].w, b.z, b.w);
      }
    }
  }

  // acc[j] = {D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]}: rows are features n0+g(+8),
  // columns tokens m0 + 8j + 2t (+1).
#pragma unroll
  for (int j = 0; j < J; ++j) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int n = n0 + g + 8 * (r / 2), tok = m0 + 8 * j + 2 * t + r % 2;
      if (tok >= p.m) continue;
      if (p.partial)
        p.partial[(static_cast<size_t>(z) * p.m + tok) * p.n + n] = acc[j][r];
      else
        p.out[static_cast<size_t>(tok) * p.n + n] =
            __float2bfloat16(Epilogue(p, acc[j][r], tok, n));
    }
  }
}

// Sums the splits' partials in a fixed order and applies the epilogue; 4 outputs per thread
// (n % 64 == 0, so a group of 4 never crosses a row).
__global__ void ReduceKernel(const Args p) {
  const size_t total4 = static_cast<size_t>(p.m) * p.n / 4;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total4;
       i += size_t(gridDim.x) * blockDim.x) {
    float4 s = reinterpret_cast<const float4*>(p.partial)[i];
    for (int z = 1; z < p.splits; ++z) {
      const float4 v = reinterpret_cast<const float4*>(p.partial)[z * total4 + i];
      s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
    }
    const int tok = static_cast<int>(4 * i / p.n), n = static_cast<int>(4 * i % p.n);
    const float v[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
    for (int e = 0; e < 4; ++e)
      p.out[static_cast<size_t>(tok) * p.n + n + e] =
          __float2bfloat16(Epilogue(p, v[e], tok, n + e));
  }
}

__global__ void CompareKernel(const __nv_bfloat16* x, const __nv_bfloat16* ref, size_t n,
                              float* sums) {
  float d2 = 0.f, r2 = 0.f, bad = 0.f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const float a = __bfloat162float(x[i]), b = __bfloat162float(ref[i]);
    if (!isfinite(a) && isfinite(b)) bad += 1.f;
    d2 += (a - b) * (a - b);
    r2 += b * b;
  }
  for (int o = 16; o > 0; o /= 2) {
    d2 += __shfl_xor_sync(0xffffffffu, d2, o);
    r2 += __shfl_xor_sync(0xffffffffu, r2, o);
    bad += __shfl_xor_sync(0xffffffffu, bad, o);
  }
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&sums[0], d2);
    atomicAdd(&sums[1], r2);
    atomicAdd(&sums[2], bad);
  }
}

int TileBlocks(int m) { return m <= 8 ? 1 : m <= 16 ? 2 : m <= 32 ? 4 : 8; }

}  // namespace

bool SmallMSupported(const GemmParams& p, int splits, size_t workspace_bytes) {
  if (p.m < 1 || p.m > kSmallMMaxM || p.n % kRowsPerBlock != 0 || p.k % kChunk != 0) return false;
  if (!IsAligned(p.a, 16) || !IsAligned(p.w, 16)) return false;
  if (splits < 1 || splits > p.k / kChunk) return false;
  return splits == 1 || static_cast<size_t>(splits) * p.m * p.n * sizeof(float) <= workspace_bytes;
}

Status LaunchSmallMGemm(const GemmParams& p, int splits, void* workspace, cudaStream_t stream) {
  Args args{
      p.a, p.w, p.bias, p.c,    p.out,      splits > 1 ? static_cast<float*>(workspace) : nullptr,
      p.m, p.n, p.k,    splits, p.gelu_tanh};
  const int j = TileBlocks(p.m);
  const dim3 grid(p.n / kRowsPerBlock, splits, (p.m + 8 * j - 1) / (8 * j));
  switch (j) {
    case 1:
      SmallMKernel<1><<<grid, 32 * kWarps, 0, stream>>>(args);
      break;
    case 2:
      SmallMKernel<2><<<grid, 32 * kWarps, 0, stream>>>(args);
      break;
    case 4:
      SmallMKernel<4><<<grid, 32 * kWarps, 0, stream>>>(args);
      break;
    default:
      SmallMKernel<8><<<grid, 32 * kWarps, 0, stream>>>(args);
      break;
  }
  PETAL_CUDA_CHECK_LAUNCH("SmallMKernel");
  if (splits > 1) {
    const size_t total4 = static_cast<size_t>(p.m) * p.n / 4;
    const int blocks = static_cast<int>(std::min<size_t>((total4 + 255) / 256, 1024));
    ReduceKernel<<<blocks, 256, 0, stream>>>(args);
    PETAL_CUDA_CHECK_LAUNCH("SmallMReduceKernel");
  }
  return Status::Ok();
}

Status CompareBf16(const __nv_bfloat16* x, const __nv_bfloat16* ref, size_t n, void* tmp,
                   cudaStream_t stream, double* rel_l2, bool* new_nonfinite) {
  float* sums = static_cast<float*>(tmp);
  PETAL_CUDA_CHECK(cudaMemsetAsync(sums, 0, 3 * sizeof(float), stream));
  CompareKernel<<<256, 256, 0, stream>>>(x, ref, n, sums);
  PETAL_CUDA_CHECK_LAUNCH("CompareKernel");
  float h[3];
  PETAL_CUDA_CHECK(cudaMemcpyAsync(h, sums, sizeof(h), cudaMemcpyDeviceToHost, stream));
  PETAL_CUDA_CHECK(cudaStreamSynchronize(stream));
  *rel_l2 = h[1] > 0 ? std::sqrt(double(h[0]) / h[1]) : (h[0] > 0 ? 1.0 : 0.0);
  *new_nonfinite = h[2] > 0;
  return Status::Ok();
}

}  // namespace petal::cuda
