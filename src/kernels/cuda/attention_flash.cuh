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
#include "kernels/cuda/attention_fragments.h"
#include "kernels/cuda/attention_ptx.cuh"
#include "kernels/cuda/pdl.cuh"

namespace petal::cuda::attn {

// Copies rows [0, valid_rows) of a kRows x kHeadDim bf16 tile (global row stride `stride`
// elements) into shared memory (row stride Cfg::kSmemStride); rows past valid_rows become zeros,
// so masked keys carry no NaN/Inf from memory that belongs to other sequences.
template <class Cfg, int kRows>
__device__ __forceinline__ void LoadRows(bf16* smem, const bf16* gmem, int64_t stride,
                                         int valid_rows, int tid) {
  constexpr int kChunksPerRow = Cfg::kHeadDim / 8;  // 16-byte chunks
  static_assert(Cfg::kThreads % kChunksPerRow == 0 && kRows % (Cfg::kThreads / kChunksPerRow) == 0,
                "tile must split evenly over the threads");
  // Every thread copies the same column chunk of rows r0, r0 + kRowStep, ...
  constexpr int kRowStep = Cfg::kThreads / kChunksPerRow;
  const int r0 = tid / kChunksPerRow;
  const int col = (tid % kChunksPerRow) * 8;
  const uint32_t dst = SmemAddr(smem + r0 * Cfg::kSmemStride + col);
#pragma unroll
  for (int i = 0; i < kRows / kRowStep; ++i) {
    const int r = r0 + i * kRowStep;
    const bool valid = r < valid_rows;
    // Invalid rows read nothing (src-size 0) but still get an in-bounds address: the last valid
    // row (valid_rows >= 1 for every tile the kernel loads).
    CpAsync16(dst + i * kRowStep * Cfg::kSmemStride * static_cast<int>(sizeof(bf16)),
              gmem + min(r, valid_rows - 1) * stride + col, valid);
  }
}

// Qwen3's q/k RMSNorm (weight w) + rotate-half rotary, in place on rows [0, valid_rows) of a
// kRows-row tile in shared memory whose row r sits at position pos0 + r of its sequence:
// LaunchQkNormRope's vector kernel (qk_norm_rope.cu) step for step (same sums in the same order),
// so the values are the ones it would have written. One warp per row, lane l holding dims
// 4l..4l+3 (head_dim 128); the rotate-half partner is in lane l ^ 16. The row loop is unrolled so
// the rotary table's loads of several rows are in flight at once (each is a trip to L2). Written
// with the built-ins the emulator (tests/ops/attention_emulator.h) also provides.
template <class Cfg, int kRows>
__device__ __forceinline__ void NormRopeRows(bf16* tile, int valid_rows, int pos0, const bf16* w,
                                             const AttentionQkNorm& qk, int warp, int lane) {
  constexpr int D = Cfg::kHeadDim, E = 4, kHalf = D / 2;
  static_assert(D == 32 * E, "the q/k norm prologue is written for head_dim 128");
  static_assert(kRows % Cfg::kWarps == 0, "rows must split evenly over the warps");
  const __nv_bfloat162* w2 = reinterpret_cast<const __nv_bfloat162*>(w + lane * E);
  const float2 g01 = __bfloat1622float2(w2[0]), g23 = __bfloat1622float2(w2[1]);
  const float g[E] = {g01.x, g01.y, g23.x, g23.y};
  const bool first = lane < 16;
#pragma unroll 4
  for (int i = 0; i < kRows / Cfg::kWarps; ++i) {
    const int r = warp + i * Cfg::kWarps;
    if (r >= valid_rows) break;  // warp-uniform: the shuffles below are safe
    const int pos = min(pos0 + r, qk.rope_table_rows - 1);
    const float4* cs4 = reinterpret_cast<const float4*>(
        qk.rope_table + static_cast<int64_t>(pos) * kHalf + (lane & 15) * E);
    const float4 c01 = cs4[0], c23 = cs4[1];  // (cos, sin) of the lane's 4 pairs
    const float2 c[E] = {{c01.x, c01.y}, {c01.z, c01.w}, {c23.x, c23.y}, {c23.z, c23.w}};
    __nv_bfloat162* x = reinterpret_cast<__nv_bfloat162*>(tile + r * Cfg::kSmemStride + lane * E);
    const float2 x01 = __bfloat1622float2(x[0]), x23 = __bfloat1622float2(x[1]);
    float v[E] = {x01.x, x01.y, x23.x, x23.y};
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < E; ++j) ss += v[j] * v[j];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
#ifdef PETAL_ATTN_EMULATE
    const float inv = 1.0f / std::sqrt(ss / D + qk.eps);
#else
    const float inv = rsqrtf(ss / D + qk.eps);
#endif
#pragma unroll
    for (int j = 0; j < E; ++j) v[j] *= inv * g[j];
    float o[E];
#pragma unroll
    for (int j = 0; j < E; ++j) {
      const float other = __shfl_xor_sync(0xffffffffu, v[j], 16);
      const float a = first ? v[j] : other, b = first ? other : v[j];
      o[j] = first ? a * c[j].x - b * c[j].y : b * c[j].x + a * c[j].y;
    }
    x[0] = __floats2bfloat162_rn(o[0], o[1]);
    x[1] = __floats2bfloat162_rn(o[2], o[3]);
  }
}

// kQkNorm: the loaded q and k tiles get NormRopeRows (args.qk) before use (head_dim 128 only).
template <class Cfg, bool kCausal, bool kQkNorm = false>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    FlashAttentionKernel(const FlashArgs args) {
  PdlWait();  // see pdl.cuh: before any global memory access
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
  // Keys: the sequence's first kv_lens[s] tokens when given (0: all); queries: all len tokens.
  int klen = len;
  if (args.kv_lens != nullptr) {
    const int kl = args.kv_lens[raw.w];
    if (kl > 0) klen = min(kl, len);
  }
  const int kv_head = head0 / args.group;  // the same for all heads of the CTA (group % kHPC == 0)

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
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
  const int kv_end = kCausal ? min(klen, q0 + BM) : klen;
  const int num_kv_tiles = (kv_end + BN - 1) / BN;  // >= 1 because q0 < len

#pragma unroll
  for (int h = 0; h < Cfg::kHeadsPerCta; ++h) {
    LoadRows<Cfg, BM>(sq + h * BM * kStride, gq + h * D, args.q_stride, min(BM, len - q0), tid);
  }
  LoadRows<Cfg, BN>(sk, gk, args.k_stride, min(BN, klen), tid);
  LoadRows<Cfg, BN>(sv, gv, args.v_stride, min(BN, klen), tid);
  CpAsyncCommit();

  // This warp's kMT * 16 query rows, rows warp_row0 + 16 * mt + {g, g + 8} for m-tile mt (each
  // thread holds two rows per m-tile; index [mt][0] is row g, [mt][1] row g + 8).
  constexpr int kMT = Cfg::kMTiles;
  const int warp_row0 = q0 + (warp % Cfg::kWarpsPerHead) * 16 * kMT;
  const bool warp_active = warp_row0 < len;  // warps wholly past the sequence end only sync
  // Warp w's m-tile mt is rows 16 * (w * kMT + mt) .. +15 of the stacked Q tiles in smem.
  const FragCoord lq = LdsmA(lane), lk = LdsmBKeyMajor(lane), lv = LdsmBTransposed(lane);
  // Shared-memory byte addresses of this lane's ldmatrix rows; tile offsets are added as
  // compile-time constants (kB = bytes per element), which fold into the instructions.
  constexpr int kB = sizeof(bf16);
  const uint32_t q_lane = SmemAddr(sq + (warp * kMT * 16 + lq.row) * kStride + lq.col);
  const uint32_t k_lane = SmemAddr(sk + lk.row * kStride + lk.col);
  const uint32_t v_lane = SmemAddr(sv + lv.row * kStride + lv.col);

  // With one m-tile per warp the Q fragments stay in registers for the whole pass; with more,
  // registers are needed for the accumulators, so they are re-read from shared memory per tile.
  constexpr bool kQInRegs = kMT == 1;
  uint32_t qa[kQInRegs ? kDSteps : 1][4];
  float o[kMT][kDBlocks][4] = {};  // unnormalised output accumulators
  // Running max (raw score units) and this thread's partial row sums (quad-reduced at the end).
  float m[kMT][2], l[kMT][2];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
  }

  for (int j = 0; j < num_kv_tiles; ++j) {
    const int stage = j & 1;
    if (j + 1 < num_kv_tiles) {  // prefetch the next K/V tile into the other stage
      const int next0 = (j + 1) * BN;
      LoadRows<Cfg, BN>(sk + (stage ^ 1) * Cfg::kKVElems, gk + next0 * args.k_stride, args.k_stride,
                        min(BN, klen - next0), tid);
      LoadRows<Cfg, BN>(sv + (stage ^ 1) * Cfg::kKVElems, gv + next0 * args.v_stride, args.v_stride,
                        min(BN, klen - next0), tid);
    }
    CpAsyncCommit();  // possibly empty, so the wait below always means "tile j has landed"
    CpAsyncWait<1>();
    __syncthreads();
    if constexpr (kQkNorm) {  // normalise and rotate what just landed, then share it again
      if (j == 0) {
#pragma unroll
        for (int h = 0; h < Cfg::kHeadsPerCta; ++h) {
          NormRopeRows<Cfg, BM>(sq + h * BM * kStride, min(BM, len - q0), q0, args.qk.q_weight,
                                args.qk, warp, lane);
        }
      }
      NormRopeRows<Cfg, BN>(sk + stage * Cfg::kKVElems, min(BN, klen - j * BN), j * BN,
                            args.qk.k_weight, args.qk, warp, lane);
      __syncthreads();
    }

    if constexpr (kQInRegs) {
      if (j == 0) {
#pragma unroll
        for (int kc = 0; kc < kDSteps; ++kc) LdMatrixX4(qa[kc], q_lane + kc * 16 * kB);
      }
    }

    const int k0 = j * BN;
    const bool skip = !warp_active || (kCausal && k0 > warp_row0 + 16 * kMT - 1);
    if (!skip) {
      const uint32_t k_stage = k_lane + stage * Cfg::kKVElems * kB;
      const uint32_t v_stage = v_lane + stage * Cfg::kKVElems * kB;

      // S = Q K^T for this warp's rows x BN keys.
      float s[kMT][kNBlocks][4] = {};
      // With Q re-read from shared memory, a full unroll lets the scheduler hoist every load and
      // run out of registers; a partial one keeps them in check (qa is not indexed then).
      [[maybe_unused]] constexpr int kQkUnroll = kQInRegs ? kDSteps : 2;
#pragma unroll kQkUnroll
      for (int kc = 0; kc < kDSteps; ++kc) {
        uint32_t qk[kMT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          if constexpr (kQInRegs) {
#pragma unroll
            for (int r = 0; r < 4; ++r) qk[mt][r] = qa[kc][r];
          } else {
            LdMatrixX4(qk[mt], q_lane + (mt * 16 * kStride + kc * 16) * kB);
          }
        }
#pragma unroll
        for (int nb = 0; nb < kNBlocks / 2; ++nb) {
          // Keys 16nb..16nb+15 x dims 16kc..16kc+15: b0,b1 of n-block 2nb, then of 2nb+1.
          uint32_t b[4];
          LdMatrixX4(b, k_stage + (nb * 16 * kStride + kc * 16) * kB);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            MmaBf16(s[mt][2 * nb], qk[mt], b[0], b[1]);
            MmaBf16(s[mt][2 * nb + 1], qk[mt], b[2], b[3]);
          }
        }
      }

      // Mask keys past the sequence end and, if causal, after the row (raw scores; the scale is
      // positive, so it commutes with max and is folded into the exp2 argument below).
      const bool need_mask = (k0 + BN > klen) || (kCausal && k0 + BN - 1 > warp_row0);
      if (need_mask) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
          for (int nb = 0; nb < kNBlocks; ++nb) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int col = k0 + nb * 8 + AccumCoord(lane, e).col;
              const int row = warp_row0 + mt * 16 + AccumCoord(lane, e).row;
              if (col >= klen || (kCausal && col > row)) s[mt][nb][e] = -INFINITY;
            }
          }
        }
      }

      const float c = args.scale_log2;
      float alpha[kMT][2];  // per-row rescale factor of what was accumulated so far
      bool rescale = false;
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // h = 0: row g (elements 0, 1); h = 1: row g + 8 (2, 3)
          // Online softmax: new running max of the row (the 4 lanes of a quad share a row).
          // m is kept in raw score units; probabilities are exp2(s * c - m * c).
          float mx = m[mt][h];
#pragma unroll
          for (int nb = 0; nb < kNBlocks; ++nb) {
            mx = fmaxf(mx, fmaxf(s[mt][nb][2 * h], s[mt][nb][2 * h + 1]));
          }
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          // A row that has seen no visible key keeps max -inf; subtracting 0 instead makes its
          // probabilities exp2(-inf) = 0 rather than NaN.
          const float base = mx == -INFINITY ? 0.0f : mx * c;
          // m = -inf: nothing was accumulated, and the factor is 0.
          alpha[mt][h] = FastExp2(m[mt][h] * c - base);
          rescale = rescale || alpha[mt][h] != 1.0f;
          m[mt][h] = mx;
          float sum = 0.0f;
#pragma unroll
          for (int nb = 0; nb < kNBlocks; ++nb) {
            s[mt][nb][2 * h] = FastExp2(fmaf(s[mt][nb][2 * h], c, -base));
            s[mt][nb][2 * h + 1] = FastExp2(fmaf(s[mt][nb][2 * h + 1], c, -base));
            sum += s[mt][nb][2 * h] + s[mt][nb][2 * h + 1];
          }
          l[mt][h] = l[mt][h] * alpha[mt][h] + sum;
        }
      }
      // Once the running maxima settle (long sequences), whole tiles leave every row's max
      // unchanged (alpha exactly 1): skip the accumulator rescale then (warp-uniform branch).
      if (__any_sync(0xffffffffu, rescale)) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
          for (int db = 0; db < kDBlocks; ++db) {
            o[mt][db][0] *= alpha[mt][0];
            o[mt][db][1] *= alpha[mt][0];
            o[mt][db][2] *= alpha[mt][1];
            o[mt][db][3] *= alpha[mt][1];
          }
        }
      }

      // P as bf16 A fragments, packed from the S accumulators (see the layout note at the top)
      // all at once, so the fp32 scores are dead before the P V loop needs its registers.
      uint32_t pa[BN / 16][kMT][4];
#pragma unroll
      for (int kc = 0; kc < BN / 16; ++kc) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const float* src = s[mt][2 * kc + PRegBlock(r)];
            pa[kc][mt][r] = PackBf16(src[PRegElem(r)], src[PRegElem(r) + 1]);
          }
        }
      }

      // O += P V.
#pragma unroll
      for (int kc = 0; kc < BN / 16; ++kc) {
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          // Keys 16kc..16kc+15 x dims 16dp..16dp+15, transposed: b0,b1 of d-block 2dp, then
          // of 2dp+1.
          uint32_t b[4];
          LdMatrixX4Trans(b, v_stage + (kc * 16 * kStride + dp * 16) * kB);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            MmaBf16(o[mt][2 * dp], pa[kc][mt], b[0], b[1]);
            MmaBf16(o[mt][2 * dp + 1], pa[kc][mt], b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();  // everyone is done with `stage` before iteration j+1 refills it
  }

  // Epilogue. Each warp normalises its rows and stages them as bf16 in its own rows of the Q
  // tile in shared memory (every warp is past its last read of Q: the loop ends with a barrier),
  // then writes them out row-contiguously with 16-byte stores. The staging writes are
  // conflict-free: lane (g, t) hits bank 4g + t thanks to the 16-byte row padding.
  if (!warp_active) return;
  bf16* staged = sq + warp * kMT * 16 * kStride;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = l[mt][h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      const FragCoord rc = AccumCoord(lane, 2 * h);  // elements 2h, 2h + 1: columns rc.col, +1
      bf16* dst = staged + (mt * 16 + rc.row) * kStride + rc.col;
#pragma unroll
      for (int db = 0; db < kDBlocks; ++db) {
        *reinterpret_cast<uint32_t*>(dst + db * 8) =
            PackBf16(o[mt][db][2 * h] * inv, o[mt][db][2 * h + 1] * inv);
      }
    }
  }
  __syncwarp();
  constexpr int kChunksPerRow = D / 8;  // 16-byte chunks
  const int64_t out_row = static_cast<int64_t>(args.num_heads) * D;
#pragma unroll
  for (int c = lane; c < kMT * 16 * kChunksPerRow; c += 32) {
    const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
    const int row = warp_row0 + r;
    if (row < len) {
      *reinterpret_cast<uint4*>(args.out + static_cast<int64_t>(seq_begin + row) * out_row +
                                static_cast<int64_t>(head) * D + col) =
          *reinterpret_cast<const uint4*>(staged + r * kStride + col);
    }
  }
}

}  // namespace petal::cuda::attn
