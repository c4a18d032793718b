// Gemm's epilogue in device code, shared by our split-K cluster GEMM kernels (gemm_cluster.cu,
// gemm_wgmma.cu): acc + bias + c, then GELU (tanh form, as cuBLASLt's) last, and the reduction
// of a cluster's K-split partial tiles through distributed shared memory. `P` is a kernel's
// argument struct with bias, c (bf16 or null), out, m, n, splits and gelu. Thread-safety: device
// code, stateless.
#pragma once

#include <cooperative_groups.h>
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

// After every CTA of the cluster parked its fp32 partial tile [tokens][kStride] (features
// contiguous, BN of them used) at `part` in its own shared memory and the cluster synchronised:
// CTA `split` sums 1/splits of the tile's valid rows over ranks 0, 1, ... in that order
// (deterministic), 4 features at a time, applies the epilogue and writes bf16 to out[m0 +
// row, n0 + feature]. The caller synchronises the cluster again before any CTA exits. Defined
// where cooperative groups have clusters (sm_90 device passes and the host pass).
#if defined(_CG_HAS_CLUSTER_GROUP)
template <int BN, int kStride, int kThreads, typename P>
__device__ __forceinline__ void ClusterSplitKStore(const cooperative_groups::cluster_group& cluster,
                                                   float* part, const P& p, int split, int m0,
                                                   int n0, int tile_rows) {
  const int rows = min(tile_rows, p.m - m0);
  const int groups = rows * (BN / 4), per = (groups + p.splits - 1) / p.splits;
  const int g1 = min(split * per + per, groups);
  for (int gi = split * per + static_cast<int>(threadIdx.x); gi < g1; gi += kThreads) {
    const int tl = gi / (BN / 4), nl = (gi % (BN / 4)) * 4;
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int rk = 0; rk < p.splits; ++rk) {
      const float4 v =
          *reinterpret_cast<const float4*>(cluster.map_shared_rank(part, rk) + tl * kStride + nl);
      s.x += v.x, s.y += v.y, s.z += v.z, s.w += v.w;
    }
    const int tok = m0 + tl, n = n0 + nl;
    const float v[4] = {s.x, s.y, s.z, s.w};
    __align__(8) __nv_bfloat16 o[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) o[e] = __float2bfloat16(GemmEpilogue(p, v[e], tok, n + e));
    *reinterpret_cast<uint2*>(p.out + static_cast<size_t>(tok) * p.n + n) =
        *reinterpret_cast<const uint2*>(o);
  }
}
#endif  // _CG_HAS_CLUSTER_GROUP

}  // namespace petal::cuda
