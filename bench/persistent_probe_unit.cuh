// Device side of bench/persistent_probe.cu, part 3: one unit of a phase (design in
// persistent_probe_gemm.cuh): the CTA's shared-memory view, the weight-slice copies (IssueWeights),
// the GEMM main loop with the in-CTA k-group reduction and the output / partial stores (RunUnit),
// and the dispatch over the warp-tile templates.
#pragma once
#include "persistent_probe_sync.cuh"

namespace probe {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// ---- the persistent chain ----
struct Shared {
  uint8_t* arena;   // weight regions (dynamic shared memory, first)
  uint8_t* astage;  // activation stages (after the arena)
  uint64_t* bars;   // [2 regions][kMaxChunks] weight mbarriers, then [kMaxAStages] activation ones
};

__device__ __forceinline__ const bf16* ActIn(const Params& p, int phase) {
  const int s = ShapeOf(phase);
  if (s == 0) return phase == 0 ? p.x0 : p.act[3];
  return p.act[s - 1];
}
__device__ __forceinline__ const bf16* WeightOf(const Params& p, int phase) {
  const int s = ShapeOf(phase);
  const PhaseCfg& c = p.cfg[s];
  return p.w[s] + static_cast<size_t>(phase / kShapes) * c.n * c.k;
}

// Warp 0 issues the bulk copies of `unit`'s weight slice of phase `phase` into its region. The
// caller guarantees the region is no longer read (a __syncthreads since its last use).
__device__ void IssueWeights(const Params& p, const Shared& sm, int phase, int unit) {
  if (threadIdx.x >= 32) return;
  const int s = ShapeOf(phase), lane = threadIdx.x, region = s & 1;
  const PhaseCfg& c = p.cfg[s];
  int tile, split;
  UnitCoords(c, unit, &tile, &split);
  const uint32_t bars = Smem(sm.bars + region * kMaxChunks);
  const uint32_t base = Smem(sm.arena + c.region_off);
  const unsigned chunk_bytes = static_cast<unsigned>(c.wchunk * 2);
  FenceProxyAsync();  // generic reads of the region before, async-proxy writes after
  if (lane == 0)
    for (int ch = 0; ch < c.nwc; ++ch) MbarExpectTx(bars + 8 * ch, chunk_bytes * c.bn);
  __syncwarp();
  if (c.tma) {  // ks / 64 boxes of [bn rows x 64 k], one lane: 4..6 instructions per unit
    if (lane == 0)
      for (int kb = 0; kb < c.ks / kBoxK; ++kb)
        TmaG2S2d(base + BoxDst(c, kb), &p.tmap[s], split * c.ks + kb * kBoxK,
                 (phase / kShapes) * c.n + tile * c.bn, bars + 8 * BoxChunk(c, kb));
    return;
  }
  const bf16* w = WeightOf(p, phase) + static_cast<size_t>(tile) * c.bn * c.k + split * c.ks;
  for (int i = lane; i < c.bn * c.nwc; i += 32) {
    const int r = i / c.nwc, ch = i % c.nwc;
    BulkG2S(base + r * c.wrow + ch * chunk_bytes, w + static_cast<size_t>(r) * c.k + ch * c.wchunk,
            chunk_bytes, bars + 8 * ch);
  }
}

// One unit's GEMM: activations through the cp.async pipeline, weights from the region (waiting
// on each chunk's mbarrier), fp32 accumulators, then bf16 outputs or fp32 partials.
template <int MTW, int NBW, bool kTma>
__device__ void RunUnit(const Params& p, const Shared& sm, int phase, int unit, uint32_t& wpar) {
  const int s = ShapeOf(phase), region = s & 1;
  const PhaseCfg& c = p.cfg[s];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int tile, split, fg, tg, kg;
  UnitCoords(c, unit, &tile, &split);
  WarpCoords(c, warp, &fg, &tg, &kg);
  const int m = p.m, n0 = tile * c.bn, kbeg = split * c.ks, nst = AStagesOf(c), S = c.astages;
  const bf16* a = ActIn(p, phase) + kbeg;
  const uint32_t abase = Smem(sm.astage), wbase = Smem(sm.arena + c.region_off);
  const uint32_t bars = Smem(sm.bars + region * kMaxChunks);
  const uint32_t abars = Smem(sm.bars + 2 * kMaxChunks);
  const bool atma = p.acts_tma != 0;
  const int arow = ARow(c.akc);
  const CUtensorMap* amap = &p.amap[phase == 0 ? kShapes : s];
  if (atma && threadIdx.x == 0) FenceProxyAsyncGlobal();  // inputs written before the barrier

  auto load_a = [&](int kb) {  // stage kb: AStageLen(c, kb) k from kbeg + kb * akc
    const uint32_t st = abase + (kb % S) * p.astage_bytes;
    const int len = AStageLen(c, kb), k0 = kb * c.akc;
    if (atma) {  // len / 64 boxes [M x 64 k]; the stage's last readers finished (a __syncthreads)
      if (threadIdx.x == 0) {
        const uint32_t bar = abars + 8 * (kb % S);
        FenceProxyAsync();
        MbarExpectTx(bar, static_cast<unsigned>(m * len * 2));
        for (int b = 0; b < len / kBoxK; ++b)
          TmaG2S2d(st + b * m * kBoxK * 2, amap, kbeg + k0 + b * kBoxK, 0, bar);
      }
      return;
    }
    const int cpr = len / 8;  // 16-byte chunks per token row
    for (int i = threadIdx.x; i < m * cpr; i += kThreads) {
      const int r = i / cpr, ch = i % cpr;
      CpAsync16(st + r * arow + ch * 16, a + static_cast<size_t>(r) * c.lda + k0 + ch * 8);
    }
  };
  auto wait_w = [&](int kw) {  // first k of weight chunk ch: wait for it to land
    const int ch = WeightWaitChunk(c, kw);
    if (ch < 0) return;
    const int bit = region * kMaxChunks + ch;
    MbarWait(bars + 8 * ch, (wpar >> bit) & 1u);
    wpar ^= 1u << bit;
  };

  float acc[MTW][NBW][4];
#pragma unroll
  for (int i = 0; i < MTW; ++i)
#pragma unroll
    for (int j = 0; j < NBW; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  for (int st = 0; st < S - 1; ++st) {
    if (st < nst) load_a(st);
    CpCommit();
  }
  const int frow = fg * MTW * 16, tblk = tg * NBW;
  for (int kb = 0; kb < nst; ++kb) {
    CpWaitN(S - 2);
    if (atma) {  // activation stage kb landed (parity bits 16.. of wpar)
      const int bit = 16 + kb % S;
      MbarWait(abars + 8 * (kb % S), (wpar >> bit) & 1u);
      wpar ^= 1u << bit;
    }
    wait_w(kb * c.akc);  // the stage's first sub-step (later ones: in the loop below)
    __syncthreads();     // stage kb landed for all threads; stage kb - 1 is no longer read
    if (kb + S - 1 < nst) load_a(kb + S - 1);
    CpCommit();
    const uint32_t ast = abase + (kb % S) * p.astage_bytes;
    const int nsub = AStageLen(c, kb) / kKC;
#pragma unroll 1
    for (int sub = 0; sub < nsub; ++sub) {
      if (sub) wait_w(kb * c.akc + sub * kKC);
#pragma unroll
      for (int kk = 0; kk < kKC / 16; ++kk) {
        const int kw = kb * c.akc + sub * kKC + kk * 16;  // k within the unit's slice
        if ((kw / 16) % c.wk != kg) continue;
        const int kc = (sub * kKC + kk * 16) / 8;  // 16-B chunk of k within the stage
        uint32_t af[MTW][4];
#pragma unroll
        for (int i = 0; i < MTW; ++i) {
          // matrices: features 0-7 / 8-15 of the m16 tile x k 0-7, then x k 8-15 = a0..a3
          const RowK a = LdsmWeights(lane);
          Ldsm4(wbase + WeightByte<kTma>(c, frow + i * 16 + a.row, kw + a.k), af[i]);
        }
        if constexpr (NBW == 1) {
          uint32_t b0, b1;                       // lanes 0-7: tokens x k 0-7, lanes 8-15: x k 8-15
          const RowK b = LdsmTokens(lane & 15);  // x2 reads lanes 0-15's addresses only
          Ldsm2(ast + ActByte(m, c.akc, atma, tblk * 8 + b.row, kc + b.k / 8), b0, b1);
#pragma unroll
          for (int i = 0; i < MTW; ++i) Mma(acc[i][0], af[i], b0, b1);
        } else {
#pragma unroll
          for (int j = 0; j < NBW; j += 2) {
            // matrices: n8 block j x k 0-7, x k 8-15, then block j + 1 likewise
            uint32_t b[4];
            const RowK t = LdsmTokens(lane);
            Ldsm4(ast + ActByte(m, c.akc, atma, (tblk + j) * 8 + t.row, kc + t.k / 8), b);
#pragma unroll
            for (int i = 0; i < MTW; ++i) {
              Mma(acc[i][j], af[i], b[0], b[1]);
              Mma(acc[i][j + 1], af[i], b[2], b[3]);
            }
          }
        }
      }
    }
  }
  CpWait<0>();
  __syncthreads();  // activation stages free for the next unit

  // wkred: k groups 1.. store their accumulators to the (now idle) activation area, k group 0 adds
  // them in the order q = 1, 2, .. (deterministic) and alone writes the tile. Every thread fences
  // its generic shared accesses before later async-proxy (TMA) writes to the activation stages.
  if (c.wkred) {
    float4* red = reinterpret_cast<float4*>(sm.astage);
    const int wg = warp % (c.wf * c.wt);
    if (kg > 0) {
#pragma unroll
      for (int i = 0; i < MTW; ++i)
#pragma unroll
        for (int j = 0; j < NBW; ++j)
          red[RedSlot(c, kg, wg, i, j, lane)] =
              make_float4(acc[i][j][0], acc[i][j][1], acc[i][j][2], acc[i][j][3]);
    }
    __syncthreads();
    if (kg == 0)
      for (int q = 1; q < c.wk; ++q)
#pragma unroll
        for (int i = 0; i < MTW; ++i)
#pragma unroll
          for (int j = 0; j < NBW; ++j) {
            const float4 v = red[RedSlot(c, q, wg, i, j, lane)];
            acc[i][j][0] += v.x, acc[i][j][1] += v.y, acc[i][j][2] += v.z, acc[i][j][3] += v.w;
          }
    if (atma) FenceProxyAsync();
    if (kg > 0) return;  // the next writer of the area waits on a __syncthreads first
  }
  // acc[i][j] = {D[g][2t], D[g][2t+1], D[g+8][2t], D[g+8][2t+1]}: rows features, columns tokens.
  const int g = lane / 4, t = lane % 4;
  float* part = p.ws + static_cast<size_t>(PartIndex(c, split, kg)) * m * c.n;
  bf16* out = p.act[s];
#pragma unroll
  for (int i = 0; i < MTW; ++i)
#pragma unroll
    for (int j = 0; j < NBW; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int f = n0 + frow + i * 16 + g + 8 * (e / 2);
        const int tok = (tblk + j) * 8 + 2 * t + (e % 2);
        if (c.parts == 1)
          out[static_cast<size_t>(tok) * c.n + f] = __float2bfloat16(acc[i][j][e]);
        else
          part[static_cast<size_t>(tok) * c.n + f] = acc[i][j][e];
      }
}

__device__ __forceinline__ void DispatchUnit(const Params& p, const Shared& sm, int phase, int unit,
                                             uint32_t& wpar) {
  const PhaseCfg& c = p.cfg[ShapeOf(phase)];
  switch (c.mtw * 16 + c.nbw + (c.tma ? 256 : 0)) {
#define PROBE_CASE(A, B)                            \
  case A * 16 + B:                                  \
    RunUnit<A, B, false>(p, sm, phase, unit, wpar); \
    break;                                          \
  case 256 + A * 16 + B:                            \
    RunUnit<A, B, true>(p, sm, phase, unit, wpar);  \
    break;
    // clang-format off
    PROBE_CASE(1, 1) PROBE_CASE(1, 2) PROBE_CASE(1, 4) PROBE_CASE(1, 8)
    PROBE_CASE(2, 1) PROBE_CASE(2, 2) PROBE_CASE(2, 4) PROBE_CASE(2, 8)
    PROBE_CASE(3, 1) PROBE_CASE(3, 2) PROBE_CASE(3, 4) PROBE_CASE(3, 8)
#undef PROBE_CASE
    default:
      __trap();
    // clang-format on
  }
}
#endif  // sm_90+

}  // namespace probe
