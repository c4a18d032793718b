// Internal to gemm_fused_*.cu: the epilogues of the fused GEMMs (gemm_fused_kernel.cuh), each
// applied to one thread's fp32 accumulators in registers, written straight to global memory.
//
// Both rely on the wgmma accumulator layout of a 64 x N warpgroup tile: a thread holds rows
// r and r + 8 (r = lane / 4 within its warp's 16 rows) at columns 8 j + 2 (lane % 4) + {0, 1},
// fragment element e = c + 2 row + 4 j (c the column parity). So element e + 1 is the next column
// of the same row, e + 4 * (N / 16) is the column N / 2 further, and the four lanes of a quad
// together hold whole rows. Every use checks the coordinates it assumes and writes NaN where they
// do not hold, so a layout change in CUTLASS fails the tests instead of computing garbage.
#pragma once

#include <cuda_bf16.h>

#include "kernels/cuda/gemm_fused_kernel.cuh"

namespace petal::cuda::gemm_fused {

constexpr float kPoison = __builtin_nanf("");

// SwiGLU over interleaved gate/up columns (2i gate, 2i + 1 up): out[m, i] = silu(g) * u.
struct SwigluEpilogue : EpilogueBase<SwigluEpilogue> {
  struct Arguments {
    cutlass::bfloat16_t* out = nullptr;  // [M, N / 2] row-major
  };
  using Params = Arguments;
  static Arguments FromCall(const Call& c) { return {static_cast<cutlass::bfloat16_t*>(c.out)}; }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const& shape, Arguments const& args) {
    return args.out != nullptr && cute::get<1>(shape) % 2 == 0;
  }
  CUTLASS_HOST_DEVICE explicit SwigluEpilogue(Params const& p) : params(p) {}

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine,
            class FrgLayout, class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL shape, BlockShapeMNK blk, BlockCoordMNKL coord,
                                 cute::Tensor<FrgEngine, FrgLayout> const& acc, TiledMma mma,
                                 ResidueMNK, int thread_idx, char*) {
    using namespace cute;
    const int M = get<0>(shape), N = get<1>(shape);
    const int64_t ld = N / 2;
    Tensor tc = ThreadCoords(shape, blk, coord, mma, thread_idx);
    static_assert(decltype(size(acc))::value % 2 == 0, "accumulators come in pairs");
    CUTLASS_PRAGMA_UNROLL
    for (int e = 0; e < size(acc); e += 2) {
      const int m = get<0>(tc(e)), n = get<1>(tc(e));
      if (m >= M || n >= N) continue;
      float v = kPoison;
      if (get<0>(tc(e + 1)) == m && get<1>(tc(e + 1)) == n + 1 && (n & 1) == 0) {
        const float g = acc(e), u = acc(e + 1);
        v = g / (1.f + __expf(-g)) * u;
      }
      params.out[static_cast<int64_t>(m) * ld + (n >> 1)] = cutlass::bfloat16_t(v);
    }
  }

  Params params;
};

// The Qwen3 QKV projection with its q/k RMSNorm and rotate-half rotary: columns are heads of 128
// ([q heads | k heads | v heads]), one head per 128-wide tile. Per row: x = acc + bias; q and k
// heads x = RmsNorm(x) * w (q_norm / k_norm), then rotary at positions[m] from the table; v heads
// x as is. One bf16 rounding (the unfused path also rounds the GEMM's output).
struct QkvRopeEpilogue : EpilogueBase<QkvRopeEpilogue> {
  static constexpr int kHeadDim = 128;
  struct Arguments {
    cutlass::bfloat16_t* out = nullptr;  // [M, N]
    const __nv_bfloat16* bias = nullptr;
    const __nv_bfloat16* q_norm = nullptr;
    const __nv_bfloat16* k_norm = nullptr;
    float eps = 1e-6f;
    const int32_t* positions = nullptr;
    const float2* rope_table = nullptr;
    int rope_rows = 0;
    int num_q_heads = 0, num_kv_heads = 0;
  };
  using Params = Arguments;
  static Arguments FromCall(const Call& c) {
    return {static_cast<cutlass::bfloat16_t*>(c.out),
            static_cast<const __nv_bfloat16*>(c.bias),
            static_cast<const __nv_bfloat16*>(c.q_norm),
            static_cast<const __nv_bfloat16*>(c.k_norm),
            c.eps,
            c.positions,
            c.rope_table,
            c.rope_rows,
            c.num_q_heads,
            c.num_kv_heads};
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const& shape, Arguments const& a) {
    return a.out != nullptr &&
           cute::get<1>(shape) == (a.num_q_heads + 2 * a.num_kv_heads) * kHeadDim &&
           (a.positions == nullptr || (a.rope_table != nullptr && a.rope_rows > 0));
  }
  CUTLASS_HOST_DEVICE explicit QkvRopeEpilogue(Params const& p) : params(p) {}

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine,
            class FrgLayout, class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL shape, BlockShapeMNK blk, BlockCoordMNKL coord,
                                 cute::Tensor<FrgEngine, FrgLayout> const& acc, TiledMma mma,
                                 ResidueMNK, int thread_idx, char*) {
    using namespace cute;
    static_assert(decltype(size<1>(blk))::value == kHeadDim, "one head per tile");
    constexpr int kVals = decltype(size(acc))::value;
    constexpr int kHalf = kVals / 2;  // element e + kHalf is column + 64 (see the file comment)
    static_assert(kVals == 64, "a 64 x 128 warpgroup tile: 64 accumulators per thread");
    const int M = get<0>(shape), N = get<1>(shape);
    const int head = get<1>(coord);  // tile column = head index
    const int col0 = head * kHeadDim;
    Tensor tc = ThreadCoords(shape, blk, coord, mma, thread_idx);
    const int m0 = get<0>(tc(0));
    bool ok = true;
    float v[kVals];
    float ss[2] = {0.f, 0.f};
    CUTLASS_PRAGMA_UNROLL
    for (int e = 0; e < kVals; ++e) {
      const int n = get<1>(tc(e));
      float x = acc(e);
      if (params.bias != nullptr && n < N) x += __bfloat162float(params.bias[n]);
      v[e] = x;
      const int slot = (e >> 1) & 1;  // row r or r + 8
      ss[slot] += x * x;
      ok &= get<0>(tc(e)) == m0 + 8 * slot;
      if (e < kHalf) ok &= get<1>(tc(e + kHalf)) == n + kHeadDim / 2 && n - col0 < kHeadDim / 2;
    }
    const bool is_v = head >= params.num_q_heads + params.num_kv_heads;
    const __nv_bfloat16* w = head < params.num_q_heads ? params.q_norm : params.k_norm;
    if (!is_v && w != nullptr) {
      CUTLASS_PRAGMA_UNROLL
      for (int s = 0; s < 2; ++s) {  // the quad's four lanes hold the row's 128 columns
        ss[s] += __shfl_xor_sync(0xffffffffu, ss[s], 1);
        ss[s] += __shfl_xor_sync(0xffffffffu, ss[s], 2);
        ss[s] = rsqrtf(ss[s] / kHeadDim + params.eps);
      }
      CUTLASS_PRAGMA_UNROLL
      for (int e = 0; e < kVals; ++e)
        v[e] *= ss[(e >> 1) & 1] * __bfloat162float(w[get<1>(tc(e)) - col0]);
    }
    if (!is_v && params.positions != nullptr) {
      int pos[2];
      CUTLASS_PRAGMA_UNROLL
      for (int s = 0; s < 2; ++s) {
        const int m = m0 + 8 * s;
        pos[s] = m < M ? min(max(params.positions[m], 0), params.rope_rows - 1) : 0;
      }
      CUTLASS_PRAGMA_UNROLL
      for (int e = 0; e < kHalf; ++e) {
        const int j = get<1>(tc(e)) - col0;  // frequency index, < 64
        const float2 cs = params.rope_table[static_cast<int64_t>(pos[(e >> 1) & 1]) * 64 + j];
        const float a = v[e], b = v[e + kHalf];
        v[e] = a * cs.x - b * cs.y;
        v[e + kHalf] = b * cs.x + a * cs.y;
      }
    }
    CUTLASS_PRAGMA_UNROLL
    for (int e = 0; e < kVals; e += 2) {
      const int m = get<0>(tc(e)), n = get<1>(tc(e));
      if (m >= M || n >= N) continue;
      __nv_bfloat162 pair = ok ? __floats2bfloat162_rn(v[e], v[e + 1])
                               : __floats2bfloat162_rn(kPoison, kPoison);
      *reinterpret_cast<__nv_bfloat162*>(params.out + static_cast<int64_t>(m) * N + n) = pair;
    }
  }

  Params params;
};

}  // namespace petal::cuda::gemm_fused
