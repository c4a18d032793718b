// Internal to gemm_fused_*.cu: the epilogues of the fused GEMMs (gemm_fused_kernel.cuh), each
// applied to one thread's fp32 accumulators in registers, written straight to global memory:
// SwiGLU (Qwen3 gate/up), q/k norm + rotary (Qwen3 QKV), bias + erf GELU (BERT FFN input).
//
// All rely on the wgmma accumulator layout of a 64 x N warpgroup tile: a thread holds rows
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

// A 4 x 4 transpose across the four lanes of a quad: lane q holds a[t] for t = 0..3 and gets
// b[u] = lane u's a[q]. Two butterfly stages (lanes q ^ 2, then q ^ 1), each swapping half of
// the values: four shuffles and a few selects. Every lane of the warp must call it.
CUTLASS_DEVICE void QuadTranspose(const float (&a)[4], float (&b)[4]) {
  const bool hi = threadIdx.x & 2, odd = threadIdx.x & 1;
  // Stage 1: the upper lanes' columns 0-1 trade places with the lower lanes' columns 2-3.
  const float y0 = __shfl_xor_sync(0xffffffffu, hi ? a[0] : a[2], 2);
  const float y1 = __shfl_xor_sync(0xffffffffu, hi ? a[1] : a[3], 2);
  const float c0 = hi ? y0 : a[0], c1 = hi ? y1 : a[1];
  const float c2 = hi ? a[2] : y0, c3 = hi ? a[3] : y1;
  // Stage 2: the same within each pair of lanes, one column apart.
  const float z0 = __shfl_xor_sync(0xffffffffu, odd ? c0 : c1, 1);
  const float z1 = __shfl_xor_sync(0xffffffffu, odd ? c2 : c3, 1);
  b[0] = odd ? z0 : c0;
  b[1] = odd ? c1 : z0;
  b[2] = odd ? z1 : c2;
  b[3] = odd ? c3 : z1;
}

// Whether every one of a thread's kVals accumulators of a 64-row warpgroup tile sits where the
// layout StoreRowPairs stores assumes (element e at row m0 + 8 s, column
// n_tile + 8 j + 2 (lane % 4) + c; tc: ThreadCoords). The offsets are the same in every tile, so
// the epilogues check a thread's first tile only (LayoutCheck).
template <int kVals, class Coords>
CUTLASS_DEVICE bool LayoutHolds(Coords const& tc, int m0, int n_tile) {
  const int q = threadIdx.x & 3;
  bool ok = true;
  CUTLASS_PRAGMA_UNROLL
  for (int e = 0; e < kVals; ++e) {
    const int j = e >> 2, s = (e >> 1) & 1;
    ok &= cute::get<0>(tc(e)) == m0 + 8 * s &&
          cute::get<1>(tc(e)) == n_tile + 8 * j + 2 * q + (e & 1);
  }
  return ok;
}

// One thread's memo of LayoutHolds: -1 until its first tile, then whether the layout held.
struct LayoutCheck {
  int state = -1;
  template <int kVals, class Coords>
  CUTLASS_DEVICE bool Holds(Coords const& tc, int m0, int n_tile) {
    if (state < 0) state = LayoutHolds<kVals>(tc, m0, n_tile);
    return state == 1;
  }
};

// v[e] = acc(e) + bias[column] (bias optional, columns past N get none) for one thread's kVals
// accumulators of a 64-row warpgroup tile, in the layout LayoutHolds checks. N must be even
// (the bias is read two columns at a time).
template <int kVals, class Acc>
CUTLASS_DEVICE void BiasedFragment(Acc const& acc, const __nv_bfloat16* bias, int N, int n_tile,
                                   float (&v)[kVals]) {
  const int q = threadIdx.x & 3;
  CUTLASS_PRAGMA_UNROLL
  for (int e = 0; e < kVals; e += 2) {
    const int n = n_tile + 8 * (e >> 2) + 2 * q;
    float2 b = make_float2(0.f, 0.f);
    if (bias != nullptr && n < N)
      b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(bias + n));
    v[e] = acc(e) + b.x;
    v[e + 1] = acc(e + 1) + b.y;
  }
}

// Stores one thread's kVals values of a 64-row warpgroup tile laid out as the accumulators
// (element e = c + 2 s + 4 j at row m0 + 8 s, column n_tile + 8 j + 2 (lane % 4) + c) into
// out [M, N] row-major as bf16, rows and columns past M / N skipped, NaN everywhere if !ok.
// Blocks are taken two at a time and regrouped across the quad, so each lane stores four
// consecutive columns (8 bytes) and a quad 32 contiguous bytes of a row: N must be a multiple of
// 4 and out 8-byte aligned. Every lane of the warp must call it.
template <int kVals>
CUTLASS_DEVICE void StoreRowPairs(const float (&v)[kVals], bool ok, cutlass::bfloat16_t* out, int M,
                                  int N, int m0, int n_tile) {
  static_assert(kVals % 8 == 0, "whole pairs of 8-column blocks per row slot");
  const int lane = threadIdx.x & 31, q = lane & 3, base = lane & ~3, t = q >> 1;
  CUTLASS_PRAGMA_UNROLL
  for (int s = 0; s < 2; ++s) {
    const int m = m0 + 8 * s;
    CUTLASS_PRAGMA_UNROLL
    for (int g = 0; g < kVals / 8; ++g) {
      uint32_t p[2];
      CUTLASS_PRAGMA_UNROLL
      for (int u = 0; u < 2; ++u) {
        const int e = 2 * s + 4 * (2 * g + u);
        __nv_bfloat162 h =
            ok ? __floats2bfloat162_rn(v[e], v[e + 1]) : __floats2bfloat162_rn(kPoison, kPoison);
        p[u] = *reinterpret_cast<uint32_t*>(&h);
      }
      // Lane q stores columns 16 g + 4 q .. + 3: block u = q / 2, from lanes 2q and 2q + 1
      // (mod 4).
      const uint32_t x0 = __shfl_sync(0xffffffffu, p[0], base | ((2 * q) & 3));
      const uint32_t x1 = __shfl_sync(0xffffffffu, p[1], base | ((2 * q) & 3));
      const uint32_t y0 = __shfl_sync(0xffffffffu, p[0], base | ((2 * q + 1) & 3));
      const uint32_t y1 = __shfl_sync(0xffffffffu, p[1], base | ((2 * q + 1) & 3));
      const int col = n_tile + 16 * g + 4 * q;
      if (m >= M || col >= N) continue;
      uint2 packed;
      packed.x = t ? x1 : x0;
      packed.y = t ? y1 : y0;
      *reinterpret_cast<uint2*>(out + static_cast<int64_t>(m) * N + col) = packed;
    }
  }
}

// SwiGLU over interleaved gate/up columns (2i gate, 2i + 1 up): out[m, i] = silu(g) * u.
// N (= 2 inter) must be a multiple of 8, so that every row of out starts 8-byte aligned.
struct SwigluEpilogue : EpilogueBase<SwigluEpilogue> {
  struct Arguments {
    cutlass::bfloat16_t* out = nullptr;  // [M, N / 2] row-major
    bool no_store = false;               // Call::probe_no_store
  };
  using Params = Arguments;
  static Arguments FromCall(const Call& c) {
    return {static_cast<cutlass::bfloat16_t*>(c.out), c.probe_no_store};
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const& shape, Arguments const& args) {
    return args.out != nullptr && cute::get<1>(shape) % 8 == 0;  // rows of out: 8-byte aligned
  }
  CUTLASS_HOST_DEVICE explicit SwigluEpilogue(Params const& p) : params(p) {}

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine,
            class FrgLayout, class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL shape, BlockShapeMNK blk, BlockCoordMNKL coord,
                                 cute::Tensor<FrgEngine, FrgLayout> const& acc, TiledMma mma,
                                 ResidueMNK, int thread_idx, char*) {
    using namespace cute;
    if (params.no_store) return;
    const int M = get<0>(shape), N = get<1>(shape);
    const int64_t ld = N / 2;
    Tensor tc = ThreadCoords(shape, blk, coord, mma, thread_idx);
    constexpr int kVals = decltype(size(acc))::value;
    static_assert(kVals % 16 == 0, "whole groups of four 8-column blocks per row slot");
    // Fragment element e = c + 2 s + 4 j: column parity c, row slot s, 8-column block j. The
    // activation of (s, j) sits at column n0 / 2 + 4 j + (lane % 4) of row m0 + 8 s. Blocks are
    // taken four at a time and transposed across the quad, so each lane stores four consecutive
    // activations (8 bytes) and a quad a whole 32-byte sector of a row.
    const int m0 = get<0>(tc(0));
    const int n0 = get<1>(tc(0)) - 2 * (threadIdx.x & 3);  // the tile's first column
    // The layout is the same in every tile relative to (m0, n0), so it is checked on this
    // thread's first tile only.
    if (layout_ok_ < 0) {
      bool ok = (n0 & 1) == 0 && ld % 4 == 0;
      CUTLASS_PRAGMA_UNROLL
      for (int e = 0; e < kVals; e += 2) {
        const int s = (e >> 1) & 1, j = e >> 2;
        ok &= get<0>(tc(e)) == m0 + 8 * s && get<0>(tc(e + 1)) == m0 + 8 * s &&
              get<1>(tc(e)) == n0 + 8 * j + 2 * (threadIdx.x & 3) &&
              get<1>(tc(e + 1)) == get<1>(tc(e)) + 1;
      }
      layout_ok_ = ok;
    }
    const bool ok = layout_ok_ == 1 && (n0 & 1) == 0;
    const int q = threadIdx.x & 3;
    CUTLASS_PRAGMA_UNROLL
    for (int s = 0; s < 2; ++s) {
      const int m = m0 + 8 * s;
      CUTLASS_PRAGMA_UNROLL
      for (int g = 0; g < kVals / 16; ++g) {
        float a[4], b[4];
        CUTLASS_PRAGMA_UNROLL
        for (int t = 0; t < 4; ++t) {
          const int e = 2 * s + 4 * (4 * g + t);
          const float gate = acc(e), up = acc(e + 1);
          // Fast divide: 2 ulp, far below bf16's rounding; a huge denominator (gate < -88)
          // gives 0, silu's limit.
          a[t] = __fdividef(gate * up, 1.f + __expf(-gate));
        }
        QuadTranspose(a, b);
        const int col = n0 / 2 + 16 * g + 4 * q;  // b[0..3] are columns col .. col + 3
        if (m >= M || 2 * col >= N) continue;
        if (!ok) b[0] = b[1] = b[2] = b[3] = kPoison;
        __nv_bfloat162 lo = __floats2bfloat162_rn(b[0], b[1]);
        __nv_bfloat162 hi = __floats2bfloat162_rn(b[2], b[3]);
        uint2 packed;
        packed.x = *reinterpret_cast<uint32_t*>(&lo);
        packed.y = *reinterpret_cast<uint32_t*>(&hi);
        *reinterpret_cast<uint2*>(params.out + static_cast<int64_t>(m) * ld + col) = packed;
      }
    }
  }

  Params params;
  int layout_ok_ = -1;  // per thread: -1 unchecked, else whether the layout held
};

// The Qwen3 QKV projection with its q/k RMSNorm and rotate-half rotary: columns are heads of 128
// ([q heads | k heads | v heads]), whole heads per tile (128 or 256 wide). Per row: x = acc +
// bias; q and k heads x = RmsNorm(x) * w (q_norm / k_norm), then rotary at positions[m] from the
// table; v heads x as is. One bf16 rounding (the unfused path also rounds the GEMM's output).
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
    constexpr int kTileN = decltype(size<1>(blk))::value;
    static_assert(kTileN % kHeadDim == 0, "whole heads per tile");
    constexpr int kHeads = kTileN / kHeadDim;
    constexpr int kVals = decltype(size(acc))::value;
    static_assert(kVals == kTileN / 2, "a 64-row warpgroup tile: two rows x N / 4 per thread");
    // Fragment element e = c + 2 s + 4 j: column parity c, row slot s (row m0 + 8 s), 8-column
    // block j = 16 h + jl of head h; its column is 8 j + 2 q + c (q = lane % 4). Column + 64 of
    // the same head is element e + 32 (block jl + 8).
    const int M = get<0>(shape), N = get<1>(shape);
    const int q = threadIdx.x & 3;
    const int n_tile = get<1>(coord) * kTileN;
    Tensor tc = ThreadCoords(shape, blk, coord, mma, thread_idx);
    const int m0 = get<0>(tc(0));
    const bool ok = layout_.Holds<kVals>(tc, m0, n_tile);
    float v[kVals];
    BiasedFragment<kVals>(acc, params.bias, N, n_tile, v);
    const int first_head = n_tile / kHeadDim, qk_heads = params.num_q_heads + params.num_kv_heads;
    if (params.q_norm != nullptr) {
      float ss[2][kHeads] = {};
      CUTLASS_PRAGMA_UNROLL
      for (int e = 0; e < kVals; ++e) ss[(e >> 1) & 1][(e >> 2) / 16] += v[e] * v[e];
      CUTLASS_PRAGMA_UNROLL
      for (int s = 0; s < 2; ++s) CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < kHeads; ++h) {  // the quad's four lanes hold the row's 128 columns
        ss[s][h] += __shfl_xor_sync(0xffffffffu, ss[s][h], 1);
        ss[s][h] += __shfl_xor_sync(0xffffffffu, ss[s][h], 2);
        ss[s][h] = rsqrtf(ss[s][h] / kHeadDim + params.eps);
      }
      CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < kHeads; ++h) {
        const int head = first_head + h;
        if (head >= qk_heads) continue;  // v (or past N)
        const __nv_bfloat16* w = head < params.num_q_heads ? params.q_norm : params.k_norm;
        CUTLASS_PRAGMA_UNROLL
        for (int jl = 0; jl < 16; ++jl) {  // columns 8 jl + 2 q and + 1 of the head, both rows
          const float2 wf =
              __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(w + 8 * jl + 2 * q));
          CUTLASS_PRAGMA_UNROLL
          for (int s = 0; s < 2; ++s) {
            const int e = 2 * s + 4 * (16 * h + jl);
            v[e] *= ss[s][h] * wf.x;
            v[e + 1] *= ss[s][h] * wf.y;
          }
        }
      }
    }
    if (params.positions != nullptr) {
      CUTLASS_PRAGMA_UNROLL
      for (int s = 0; s < 2; ++s) {
        const int m = m0 + 8 * s;
        const int pos = m < M ? min(max(params.positions[m], 0), params.rope_rows - 1) : 0;
        CUTLASS_PRAGMA_UNROLL
        for (int jl = 0; jl < 8; ++jl) {
          // Frequencies f = 8 jl + 2 q and f + 1: (cos, sin) of both in one 16-byte load, shared
          // by every head of the tile.
          const float4 cs = *reinterpret_cast<const float4*>(
              params.rope_table + static_cast<int64_t>(pos) * 64 + 8 * jl + 2 * q);
          CUTLASS_PRAGMA_UNROLL
          for (int h = 0; h < kHeads; ++h) {
            if (first_head + h >= qk_heads) continue;
            const int e = 2 * s + 4 * (16 * h + jl);  // its partner, column + 64: e + 32
            const float a0 = v[e], b0 = v[e + 32], a1 = v[e + 1], b1 = v[e + 33];
            v[e] = a0 * cs.x - b0 * cs.y;
            v[e + 32] = b0 * cs.x + a0 * cs.y;
            v[e + 1] = a1 * cs.z - b1 * cs.w;
            v[e + 33] = b1 * cs.z + a1 * cs.w;
          }
        }
      }
    }
    StoreRowPairs<kVals>(v, ok, params.out, M, N, m0, n_tile);
  }

  Params params;
  LayoutCheck layout_;
};

// BERT's FFN input: out = gelu(acc + bias) with the exact (erf) GELU of LaunchGelu, one bf16
// rounding (the unfused path rounds the GEMM's output first). Any tile width; N a multiple of 8.
struct BiasGeluEpilogue : EpilogueBase<BiasGeluEpilogue> {
  struct Arguments {
    cutlass::bfloat16_t* out = nullptr;   // [M, N]
    const __nv_bfloat16* bias = nullptr;  // [N] or null
  };
  using Params = Arguments;
  static Arguments FromCall(const Call& c) {
    return {static_cast<cutlass::bfloat16_t*>(c.out), static_cast<const __nv_bfloat16*>(c.bias)};
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const& shape, Arguments const& a) {
    return a.out != nullptr && cute::get<1>(shape) % 8 == 0;
  }
  CUTLASS_HOST_DEVICE explicit BiasGeluEpilogue(Params const& p) : params(p) {}

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine,
            class FrgLayout, class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL shape, BlockShapeMNK blk, BlockCoordMNKL coord,
                                 cute::Tensor<FrgEngine, FrgLayout> const& acc, TiledMma mma,
                                 ResidueMNK, int thread_idx, char*) {
    using namespace cute;
    constexpr int kTileN = decltype(size<1>(blk))::value;
    constexpr int kVals = decltype(size(acc))::value;
    static_assert(kVals == kTileN / 2, "a 64-row warpgroup tile: two rows x N / 4 per thread");
    const int M = get<0>(shape), N = get<1>(shape);
    const int n_tile = get<1>(coord) * kTileN;
    Tensor tc = ThreadCoords(shape, blk, coord, mma, thread_idx);
    const int m0 = get<0>(tc(0));
    const bool ok = layout_.Holds<kVals>(tc, m0, n_tile);
    float v[kVals];
    BiasedFragment<kVals>(acc, params.bias, N, n_tile, v);
    CUTLASS_PRAGMA_UNROLL
    for (int e = 0; e < kVals; ++e) v[e] = 0.5f * v[e] * (1.f + erff(v[e] * 0.70710678118654752f));
    StoreRowPairs<kVals>(v, ok, params.out, M, N, m0, n_tile);
  }

  Params params;
  LayoutCheck layout_;
};

}  // namespace petal::cuda::gemm_fused
