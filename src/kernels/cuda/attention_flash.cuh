// The flash attention kernel (FlashAttention-2 scheme, written for Petal): one CTA computes one
// query tile of one sequence for kHeadsPerCta query heads of one KV head, streaming that sequence's
// K/V tiles through double-buffered shared memory, with an fp32 online softmax and bf16 mma.sync
// tensor-core math. Internal header, included by attention_flash.cu. Thread-safety: a kernel, no
// shared host state.
//
// Fragment layouts (PTX mma.m16n8k16, lane = 4 * g + t, g = lane / 4, t = lane % 4):
//   A 16x16: a0 (g, 2t..2t+1)  a1 (g+8, 2t..)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)
//   B 16x8 : b0 (k = 2t..2t+1, n = g)  b1 (k = 2t+8.., n = g)
//   C 16x8 : c0,c1 (g, 2t..2t+1)  c2,c3 (g+8, 2t..2t+1)
// So S = Q K^T needs B[k][n] = K[n][k]: a plain ldmatrix of K rows. O += P V needs
// B[k][n] = V[k][n]: a transposed ldmatrix of V rows. The S accumulator of columns 16c..16c+15
// (n-blocks 2c and 2c+1) is exactly the A fragment of P for k-step c, so P never leaves registers.
#pragma once

#include <cmath>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_ptx.cuh"

namespace petal::cuda::attn {

// Copies rows [0, valid_rows) of a kRows x kHeadDim bf16 tile (global row stride `stride`
// elements) into shared memory (row stride Cfg::kSmemStride); rows past valid_rows become zeros,
// so masked keys carry no NaN/Inf from memory that belongs to other sequences.
template <class Cfg, int kRows>
__device__ __forceinline__ void LoadRows(bf16* smem, const bf16* gmem, int64_t stride,
                                         int valid_rows, int tid) {
  constexpr int kChunksPerRow = Cfg::kHeadDim / 8;  // 16-byte chunks
  constexpr int kChunks = kRows * kChunksPerRow;
  static_assert(kChunks % Cfg::kThreads == 0, "tile must split evenly over the threads");
#pragma unroll
  for (int i = 0; i < kChunks / Cfg::kThreads; ++i) {
    const int c = tid + i * Cfg::kThreads;
    const int r = c / kChunksPerRow;
    const int col = (c % kChunksPerRow) * 8;
    const bool valid = r < valid_rows;
    const bf16* src = gmem + (valid ? r * stride + col : 0);
    CpAsync16(SmemAddr(smem + r * Cfg::kSmemStride + col), src, valid);
  }
}

template <class Cfg, bool kCausal>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    FlashAttentionKernel(const FlashArgs args) {
  constexpr int D = Cfg::kHeadDim;
  constexpr int BM = Cfg::kBlockM;
  constexpr int BN = Cfg::kBlockN;
  constexpr int kStride = Cfg::kSmemStride;
  constexpr int kDSteps = D / 16;   // k-steps of Q K^T
  constexpr int kNBlocks = BN / 8;  // n8 column blocks of S
  constexpr int kDBlocks = D / 8;   // n8 column blocks of O

  // Grid = (capacity bound on work items) x (head groups of kHeadsPerCta query heads that share
  // one KV head); items past the planned count exit at once.
  const int head_groups = args.num_heads / Cfg::kHeadsPerCta;
  const int item_idx = blockIdx.x / head_groups;
  if (item_idx >= *args.work_count) return;
  const int head0 = (blockIdx.x - item_idx * head_groups) * Cfg::kHeadsPerCta;
  const int4 raw = reinterpret_cast<const int4*>(args.work_items)[item_idx];
  const int seq_begin = raw.x, len = raw.y, q0 = raw.z;
  const int kv_head = head0 / args.group;  // the same for all heads of the CTA (group % kHPC == 0)

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  // Warp w computes rows 16 * (w % kWarpsPerHead) .. +15 of head head0 + w / kWarpsPerHead.
  const int head = head0 + warp / Cfg::kWarpsPerHead;

  const bf16* gq = args.q + static_cast<int64_t>(seq_begin + q0) * args.q_stride +
                   static_cast<int64_t>(head0) * D;
  const bf16* gk =
      args.k + static_cast<int64_t>(seq_begin) * args.k_stride + static_cast<int64_t>(kv_head) * D;
  const bf16* gv =
      args.v + static_cast<int64_t>(seq_begin) * args.v_stride + static_cast<int64_t>(kv_head) * D;

  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* sq = reinterpret_cast<bf16*>(smem_raw);  // head h's tile at sq + h * BM * kStride
  bf16* sk = sq + Cfg::kQElems;                  // stage s at sk + s * kKVElems
  bf16* sv = sk + 2 * Cfg::kKVElems;             // stage s at sv + s * kKVElems

  // Causal: keys past the tile's last query row are never visible to it.
  const int kv_end = kCausal ? min(len, q0 + BM) : len;
  const int num_kv_tiles = (kv_end + BN - 1) / BN;  // >= 1 because q0 < len

#pragma unroll
  for (int h = 0; h < Cfg::kHeadsPerCta; ++h) {
    LoadRows<Cfg, BM>(sq + h * BM * kStride, gq + h * D, args.q_stride, min(BM, len - q0), tid);
  }
  LoadRows<Cfg, BN>(sk, gk, args.k_stride, min(BN, len), tid);
  LoadRows<Cfg, BN>(sv, gv, args.v_stride, min(BN, len), tid);
  CpAsyncCommit();

  // This warp's 16 query rows; each thread holds rows g and g + 8 of them (positions in the
  // sequence row_lo, row_hi).
  const int warp_row0 = q0 + (warp % Cfg::kWarpsPerHead) * 16;
  const int row_lo = warp_row0 + g;
  const int row_hi = row_lo + 8;
  const bool warp_active = warp_row0 < len;  // warps wholly past the sequence end only sync

  uint32_t qa[kDSteps][4];    // Q fragments, loaded once
  float o[kDBlocks][4] = {};  // unnormalised output accumulator
  // Running max (in log2 units) and this thread's partial row sums (quad-reduced at the end).
  float m_lo = -INFINITY, m_hi = -INFINITY;
  float l_lo = 0.0f, l_hi = 0.0f;

  for (int j = 0; j < num_kv_tiles; ++j) {
    const int stage = j & 1;
    if (j + 1 < num_kv_tiles) {  // prefetch the next K/V tile into the other stage
      const int next0 = (j + 1) * BN;
      LoadRows<Cfg, BN>(sk + (stage ^ 1) * Cfg::kKVElems, gk + next0 * args.k_stride, args.k_stride,
                        min(BN, len - next0), tid);
      LoadRows<Cfg, BN>(sv + (stage ^ 1) * Cfg::kKVElems, gv + next0 * args.v_stride, args.v_stride,
                        min(BN, len - next0), tid);
    }
    CpAsyncCommit();  // possibly empty, so the wait below always means "tile j has landed"
    CpAsyncWait<1>();
    __syncthreads();

    if (j == 0) {  // warp w's rows are rows 16w..16w+15 of the stacked Q tiles
#pragma unroll
      for (int kc = 0; kc < kDSteps; ++kc) {
        LdMatrixX4(qa[kc],
                   SmemAddr(sq + (warp * 16 + (lane & 15)) * kStride + kc * 16 + (lane >> 4) * 8));
      }
    }

    const int k0 = j * BN;
    const bool skip = !warp_active || (kCausal && k0 > warp_row0 + 15);
    if (!skip) {
      const bf16* skj = sk + stage * Cfg::kKVElems;
      const bf16* svj = sv + stage * Cfg::kKVElems;

      // S = Q K^T for this warp's 16 rows x BN keys.
      float s[kNBlocks][4] = {};
#pragma unroll
      for (int kc = 0; kc < kDSteps; ++kc) {
#pragma unroll
        for (int nb = 0; nb < kNBlocks / 2; ++nb) {
          // Matrices: (keys 16nb+0..7, dims 16kc+0..7), (same keys, dims +8), (keys +8, dims
          // +0), (keys +8, dims +8) = b0,b1 of n-block 2nb then b0,b1 of n-block 2nb+1.
          uint32_t b[4];
          LdMatrixX4(b, SmemAddr(skj + (nb * 16 + (lane & 7) + (lane >> 4) * 8) * kStride +
                                 kc * 16 + ((lane >> 3) & 1) * 8));
          MmaBf16(s[2 * nb], qa[kc], b[0], b[1]);
          MmaBf16(s[2 * nb + 1], qa[kc], b[2], b[3]);
        }
      }

      // Scale into log2 units; mask keys past the sequence end and, if causal, after the row.
#pragma unroll
      for (int nb = 0; nb < kNBlocks; ++nb) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nb][e] *= args.scale_log2;
      }
      const bool need_mask = (k0 + BN > len) || (kCausal && k0 + BN - 1 > warp_row0);
      if (need_mask) {
#pragma unroll
        for (int nb = 0; nb < kNBlocks; ++nb) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = k0 + nb * 8 + 2 * t + (e & 1);
            const int row = e < 2 ? row_lo : row_hi;
            if (col >= len || (kCausal && col > row)) s[nb][e] = -INFINITY;
          }
        }
      }

      // Online softmax: new running max per row (the 4 lanes of a quad share a row).
      float mx_lo = m_lo, mx_hi = m_hi;
#pragma unroll
      for (int nb = 0; nb < kNBlocks; ++nb) {
        mx_lo = fmaxf(mx_lo, fmaxf(s[nb][0], s[nb][1]));
        mx_hi = fmaxf(mx_hi, fmaxf(s[nb][2], s[nb][3]));
      }
      mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, 1));
      mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, 2));
      mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, 1));
      mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, 2));
      // A row that has seen no visible key keeps max -inf; subtracting 0 instead makes its
      // probabilities exp2(-inf) = 0 rather than NaN.
      const float base_lo = mx_lo == -INFINITY ? 0.0f : mx_lo;
      const float base_hi = mx_hi == -INFINITY ? 0.0f : mx_hi;
      const float alpha_lo = exp2f(m_lo - base_lo);  // rescales what was accumulated so far
      const float alpha_hi = exp2f(m_hi - base_hi);
      m_lo = mx_lo;
      m_hi = mx_hi;

      float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
      for (int nb = 0; nb < kNBlocks; ++nb) {
        s[nb][0] = exp2f(s[nb][0] - base_lo);
        s[nb][1] = exp2f(s[nb][1] - base_lo);
        s[nb][2] = exp2f(s[nb][2] - base_hi);
        s[nb][3] = exp2f(s[nb][3] - base_hi);
        sum_lo += s[nb][0] + s[nb][1];
        sum_hi += s[nb][2] + s[nb][3];
      }
      l_lo = l_lo * alpha_lo + sum_lo;
      l_hi = l_hi * alpha_hi + sum_hi;
#pragma unroll
      for (int db = 0; db < kDBlocks; ++db) {
        o[db][0] *= alpha_lo;
        o[db][1] *= alpha_lo;
        o[db][2] *= alpha_hi;
        o[db][3] *= alpha_hi;
      }

      // O += P V, P straight from the S accumulators (see the layout note at the top).
#pragma unroll
      for (int kc = 0; kc < BN / 16; ++kc) {
        const uint32_t pa[4] = {PackBf16(s[2 * kc][0], s[2 * kc][1]),
                                PackBf16(s[2 * kc][2], s[2 * kc][3]),
                                PackBf16(s[2 * kc + 1][0], s[2 * kc + 1][1]),
                                PackBf16(s[2 * kc + 1][2], s[2 * kc + 1][3])};
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          // Matrices: (keys 16kc+0..7, dims 16dp+0..7), (keys +8, same dims), (keys +0, dims
          // +8), (keys +8, dims +8), transposed = b0,b1 of d-block 2dp then of d-block 2dp+1.
          uint32_t b[4];
          LdMatrixX4Trans(
              b, SmemAddr(svj + (kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kStride + dp * 16 +
                          (lane >> 4) * 8));
          MmaBf16(o[2 * dp], pa, b[0], b[1]);
          MmaBf16(o[2 * dp + 1], pa, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // everyone is done with `stage` before iteration j+1 refills it
  }

  if (!warp_active) return;
  l_lo += __shfl_xor_sync(0xffffffffu, l_lo, 1);
  l_lo += __shfl_xor_sync(0xffffffffu, l_lo, 2);
  l_hi += __shfl_xor_sync(0xffffffffu, l_hi, 1);
  l_hi += __shfl_xor_sync(0xffffffffu, l_hi, 2);
  const float inv_lo = l_lo > 0.0f ? 1.0f / l_lo : 0.0f;
  const float inv_hi = l_hi > 0.0f ? 1.0f / l_hi : 0.0f;
  const int64_t out_row = static_cast<int64_t>(args.num_heads) * D;
  bf16* out_lo = args.out + static_cast<int64_t>(seq_begin + row_lo) * out_row +
                 static_cast<int64_t>(head) * D + 2 * t;
  bf16* out_hi = out_lo + 8 * out_row;
#pragma unroll
  for (int db = 0; db < kDBlocks; ++db) {
    if (row_lo < len) {
      *reinterpret_cast<uint32_t*>(out_lo + db * 8) =
          PackBf16(o[db][0] * inv_lo, o[db][1] * inv_lo);
    }
    if (row_hi < len) {
      *reinterpret_cast<uint32_t*>(out_hi + db * 8) =
          PackBf16(o[db][2] * inv_hi, o[db][3] * inv_hi);
    }
  }
}

}  // namespace petal::cuda::attn
