// Device side of bench/persistent_probe.cu (see its header for what the probe is for): the work
// decomposition (shared with the host self-check, so both use the same index math), the grid
// barriers, and the persistent 112-GEMM kernel.
//
// Persistent kernel, one CTA of 256 threads (8 warps) per SM. Phase p = 4 * layer + shape, shapes
// QKV, O, GU, DOWN. Phase p is split into units (feature tile of `bn` rows, K slice `split` of
// `splits`); CTA b takes units b, b + grid, ... Per unit:
//  - weights: its [bn x ks] slice of W lands in a shared-memory REGION, one mbarrier per weight
//    chunk of `wchunk` k (expect_tx = bn * wchunk * 2 bytes), by one of two paths (PhaseCfg::tma):
//    tma2d: cp.async.bulk.tensor.2d boxes of [bn rows x 64 k] (128 B per row) from a tensor map
//      over the shape's weights of all 28 layers as a [28 N][K] bf16 matrix, CU_TENSOR_MAP_SWIZZLE
//      _128B; box kb at region + kb * bn * 128 (1024-B aligned: the arena is rounded up to 1024
//      B on the device, regions and boxes are multiples of 1024 B); wchunk / 64 boxes per chunk;
//      lane 0 issues ks / 64 (4..6) boxes per unit. Element (r, k) at WeightByte<true>: 16-byte
//      chunk (k % 64) / 8 of row r is stored at chunk ((k % 64) / 8) ^ (r % 8), so the 8 rows one
//      ldmatrix 8x8 matrix reads (same k, rows r0..r0 + 7) fall in 8 different bank groups.
//    bulk1d: cp.async.bulk 1-D copies, one `wchunk * 2`-byte copy per row per chunk (warp 0's
//      lanes issue them); row stride ks * 2 + 16 bytes (conflict-free for the same reason).
//    Two regions: even phases (QKV, GU) at the arena's bottom, odd phases (O, DOWN) at its top,
//    so phase p + 1's weights can land while phase p computes from its own.
//  - activations: [M x 64] stages through a 4-stage pipeline, loaded only after the barrier,
//    stage stride StageBytes(M) = M * 144 rounded up to 1024 B (the activation area starts at the
//    arena's end); cp.async (16-byte, .cg = L2 only), row stride 144 bytes (conflict-free
//    ldmatrix); or, with Params::acts_tma (--acts tma2d, experimental), one 2-D TMA box [M rows x
//    64 k] per stage from a map over the input [M][lda], 128B swizzle, row stride 128 B
//    (TokenByte), one mbarrier per stage (parity in bits 16.. of wpar), stages 1024-B aligned
//    (StageBytes apart). The inputs are other CTAs' generic-proxy stores: every thread fences
//    (fence.proxy.async.global) before the grid barrier and the issuing thread again before its
//    first box of the unit.
//  - math: mma.sync m16n8k16 bf16 -> fp32, weights as the 16-row side (A operand, ldmatrix x4 of
//    16 feature rows x 16 k), tokens as the 8-column side (B operand, token rows with contiguous
//    k = the "col" layout, ldmatrix x4 = two n8 blocks x 16 k, or x2 = one). The 8 warps form a
//    (wf feature groups) x (wt token groups) x (wk k groups) grid; warp tile MTW m16 tiles x NBW n8
//    blocks; with wk > 1 the warps of a CTA take the unit's k16 steps round robin.
//  - k groups (wk > 1), two modes (PhaseCfg::wkred, --wk-reduce): smem (default): after the main
//    loop k groups 1..wk-1 store their fp32 fragments to the activation area (idle then; RedSlot,
//    lane-contiguous float4s, (wk - 1) * bn * M * 4 bytes), __syncthreads, and k group 0 adds them
//    in the order 1, 2, .. and alone writes the unit's result: global partials parts = splits.
//    global (the first version): every k group writes its own global partial, parts = splits * wk.
//  - partials: with parts == 1 (splits == 1 and, in smem mode, any wk) the writing warps store bf16
//    outputs directly, no counter, no reduction; otherwise fp32 partials go to
//    ws[PartIndex][M][N]. The `splits` CTAs of one feature tile then meet on
//    a per-(phase, tile) counter (not a grid barrier), and each sums 1/splits of the tile over all
//    `parts` partials in index order (deterministic, no float atomics) and writes bf16.
//  - prefetch distance d: phase q's weights are issued before the grid barrier that precedes
//    phase q - d + 1, i.e. d = 0: after the barrier (no overlap); d = 1: just before the barrier
//    that ends phase q - 1; d = 2: one whole phase earlier (both regions in flight).
#pragma once
#include <cooperative_groups.h>
#include <cuda.h>  // CUtensorMap (type only: the encoder comes through cudart, no -lcuda)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace probe {

namespace cg = cooperative_groups;
using bf16 = __nv_bfloat16;

constexpr int kThreads = 256, kWarps = 8;
constexpr int kMaxM = 128;
constexpr int kKC = 64;                      // k per activation stage
constexpr int kAStages = 4;                  // activation pipeline depth
constexpr int kARow = (kKC + 8) * 2;         // 144 bytes per token row in a stage
constexpr int kAStageBytes = kMaxM * kARow;  // 18432
constexpr int kABytes = kAStages * kAStageBytes;
constexpr int kMaxChunks = 8;   // weight chunks (mbarriers) per region
constexpr int kMaxTiles = 256;  // tile counters per phase
constexpr int kShapes = 4;      // QKV, O, GU, DOWN
constexpr int kLayers = 28;
constexpr int kBoxK = 64;        // tma2d: box = 64 k (128 B, the 128B-swizzle span) x bn rows
constexpr int kSwzAlign = 1024;  // 128B swizzle: 8 rows x 128 B atom, destination alignment
constexpr int kArenaSlack = kSwzAlign;  // dynamic smem is rounded up to 1024 B on the device
enum WeightPath { kBulk1d = 0, kTma2d = 1 };

// One GEMM shape's decomposition; filled by the host (MakeCfg), read by both sides.
struct PhaseCfg {
  int n, k, lda;       // output features, depth, row stride of the activation input
  int bn, splits, ks;  // feature tile, K slices, slice depth
  int tiles, units,
      parts;         // n / bn, tiles * splits, global partials: splits (wkred) or splits * wk
  int mtw, nbw;      // warp tile: m16 tiles x n8 blocks (template dispatch)
  int wf, wt, wk;    // warp grid: feature groups x token groups x k groups = 8
  int wchunk, nwc;   // weight chunk depth (k) and chunk count per unit
  int tma;           // weight path: kBulk1d (1-D row copies) or kTma2d (swizzled boxes)
  int wrow;          // bulk1d: weight row stride in shared memory (bytes); tma2d: 128
  int region_bytes;  // bulk1d: bn * wrow; tma2d: (ks / 64) boxes of bn * 128 B
  int region_off;    // byte offset of this shape's region in the arena
  int wkred;         // 1: the wk k groups' accumulators are summed in shared memory (wk > 1)
  int red_bytes;     // wkred: (wk - 1) * bn * M * 4 bytes at the activation area's start
};

struct Params {
  CUtensorMap tmap[kShapes];      // tma2d: shape s's weights of all layers as [28 N rows][K] bf16
  CUtensorMap amap[kShapes + 1];  // --acts tma2d: input of shape s as [M][lda]; [kShapes]: x0
  PhaseCfg cfg[kShapes];
  const bf16* w[kShapes];      // layer l's matrix at w[s] + l * n * k, row-major [n][k]
  const bf16* x0;              // [M][1024] input of layer 0
  bf16* act[kShapes];          // outputs: qkv [M][4096], h [M][1024], gu [M][6144], x [M][1024]
  float* ws;                   // split-K partials
  unsigned* tile_cnt;          // [phases][kMaxTiles], zero at launch
  unsigned* bar;               // grid barrier counter, zero at launch
  unsigned long long* stamps;  // optional [grid][phases][3] globaltimer stamps
  int m, layers, prefetch, use_cg, arena_bytes;
  int acts_tma;  // activations through 2-D TMA boxes [M rows x 64 k], 128B swizzle (else cp.async)
  int astage_bytes;  // activation stage stride: StageBytes(m)
};

// Activation stage stride for M tokens: M rows of kARow bytes, rounded up to 1024 B (the --acts
// tma2d boxes of M x 128 B need 1024-B aligned stages; the arena is a multiple of 1024 B).
__host__ __device__ inline int StageBytes(int m) {
  return (m * kARow + kSwzAlign - 1) / kSwzAlign * kSwzAlign;
}

// ---- index math shared by the kernel and the host self-check ----
__host__ __device__ inline void UnitCoords(const PhaseCfg& c, int unit, int* tile, int* split) {
  *tile = unit / c.splits;
  *split = unit % c.splits;
}
__host__ __device__ inline void WarpCoords(const PhaseCfg& c, int warp, int* fg, int* tg, int* kg) {
  *fg = warp % c.wf;
  *tg = (warp / c.wf) % c.wt;
  *kg = warp / (c.wf * c.wt);
}
// In-CTA k-group reduction (wkred): float4 slot of fragment (i, j), lane `lane`, of the warp with
// in-group index wg = fg + wf * tg of k group q >= 1, in the activation area (reused after the main
// loop). Lane-contiguous float4s: each warp store / load is 512 contiguous bytes, conflict-free.
__host__ __device__ inline int RedSlot(const PhaseCfg& c, int q, int wg, int i, int j, int lane) {
  return ((((q - 1) * c.wf * c.wt + wg) * c.mtw + i) * c.nbw + j) * 32 + lane;
}
// Global partial index of k group kg of split `split`.
__host__ __device__ inline int PartIndex(const PhaseCfg& c, int split, int kg) {
  return c.wkred ? split : split * c.wk + kg;
}
// Share of the split-K reduction of one [M x bn] tile taken by split s: float4 groups [g0, g1).
__host__ __device__ inline void ReduceShare(const PhaseCfg& c, int m, int s, int* g0, int* g1) {
  const int groups = m * c.bn / 4, per = (groups + c.splits - 1) / c.splits;
  *g0 = s * per < groups ? s * per : groups;
  *g1 = *g0 + per < groups ? *g0 + per : groups;
}
// ldmatrix addressing: the (row, k) of the 16-byte row that `lane` points at. Weights (x4): rows
// 0-7 / 8-15 of the m16 tile at k 0-7, then at k 8-15 (= mma's a0..a3). Tokens (x4): n8 block 0
// at k 0-7, k 8-15, then block 1 (= b0, b1 of block j, then of j + 1); x2: block 0 only.
struct RowK {
  int row, k;
};
__host__ __device__ inline RowK LdsmWeights(int lane) {
  return {((lane >> 3) & 1) * 8 + (lane & 7), (lane >> 4) * 8};
}
__host__ __device__ inline RowK LdsmTokens(int lane) {
  return {(lane >> 4) * 8 + (lane & 7), ((lane >> 3) & 1) * 8};
}
// Byte offset of weight element (row, k) of a unit's [bn x ks] slice inside its region.
// bulk1d: padded rows (row stride ks * 2 + 16). tma2d: box kb = k / 64 holds k in [64 kb, 64 kb
// + 64) of all bn rows, 128 B per row, at kb * bn * 128 (1024-B aligned since bn % 8 == 0); the
// 128B swizzle stores 16-byte chunk j of row r at chunk j ^ (r % 8) (row r of the box sits at
// r * 128 from a 1024-B aligned base, so its address bits 7-9 are r % 8).
template <bool kTma>
__host__ __device__ inline int WeightByte(const PhaseCfg& c, int row, int k) {
  if constexpr (kTma)
    return (k / kBoxK) * c.bn * 128 + row * 128 + ((((k % kBoxK) >> 3) ^ (row & 7)) << 4) +
           (k & 7) * 2;
  else
    return row * c.wrow + k * 2;
}
// Byte offset of the 16-byte chunk kc (k = 8 kc .. 8 kc + 7) of token row `row` in an activation
// stage. cp.async: padded rows (arow 144, xm 0); --acts tma2d: one [M x 64 k] box with 128B
// swizzle (arow 128, xm 7: chunk kc of row r stored at kc ^ (r % 8); stages are 1024-B aligned).
__host__ __device__ inline int TokenByte(int arow, int xm, int row, int kc) {
  return row * arow + ((kc ^ (row & xm)) << 4);
}
// tma2d: destination (region-relative) of box kb and the weight chunk (mbarrier) it completes.
__host__ __device__ inline int BoxDst(const PhaseCfg& c, int kb) { return kb * c.bn * 128; }
__host__ __device__ inline int BoxChunk(const PhaseCfg& c, int kb) { return kb * kBoxK / c.wchunk; }
// Phase p reads act_in (row stride lda) and writes act[shape].
__host__ __device__ inline int ShapeOf(int phase) { return phase % kShapes; }

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// ---- PTX helpers ----
__device__ __forceinline__ uint32_t Smem(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ unsigned LdAcquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void RedRelease(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned long long GlobalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// A spin that never ends means a decomposition or barrier bug: trap (the launch then fails
// with an error) instead of hanging the GPU step. ~2^35 cycles is 10-20 s.
__device__ __forceinline__ void SpinGuard(long long t0) {
  if (clock64() - t0 > (1ll << 35)) __trap();
}
__device__ __forceinline__ void MbarInit(uint32_t bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void MbarExpectTx(uint32_t bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void MbarWait(uint32_t bar, unsigned parity) {
  const long long t0 = clock64();
  for (;;) {
    uint32_t done;
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, "
        "p; }"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    if (done) return;
    SpinGuard(t0);
  }
}
__device__ __forceinline__ void BulkG2S(uint32_t dst, const void* src, unsigned bytes,
                                        uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
}
// 2-D tensor-map load of the box at (k = x, row = y) into dst; completes tx bytes on bar.
__device__ __forceinline__ void TmaG2S2d(uint32_t dst, const CUtensorMap* map, int x, int y,
                                         uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], [%4];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void PrefetchTensorMap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
// Generic-proxy global writes (other CTAs' outputs, ordered by the grid barrier) before this
// thread's async-proxy (TMA) reads of them.
__device__ __forceinline__ void FenceProxyAsyncGlobal() {
  asm volatile("fence.proxy.async.global;" ::: "memory");
}
__device__ __forceinline__ void FenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void CpCommit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void CpWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void Ldsm4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void Ldsm2(uint32_t addr, uint32_t& r0, uint32_t& r1) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(r0), "=r"(r1)
               : "r"(addr));
}
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- grid barriers ----
// Ours: a monotonic arrival counter (zeroed before the launch). Barrier number b (0-based) of
// this launch completes when the counter reaches (b + 1) * gridDim.x. One release add per CTA,
// an acquire spin by thread 0, __syncthreads on both sides.
__device__ __forceinline__ void GridBarrier(unsigned* bar, unsigned b) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned target = (b + 1) * gridDim.x;
    RedRelease(bar, 1);
    const long long t0 = clock64();
    while (static_cast<int>(LdAcquire(bar) - target) < 0) SpinGuard(t0);
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads, 1)
    BarrierBenchKernel(unsigned* bar, int iters, int use_cg) {
  if (use_cg) {
    cg::grid_group g = cg::this_grid();
    for (int i = 0; i < iters; ++i) g.sync();
  } else {
    for (int i = 0; i < iters; ++i) GridBarrier(bar, static_cast<unsigned>(i));
  }
}

// ---- the persistent chain ----
struct Shared {
  uint8_t* arena;   // weight regions (dynamic shared memory, first)
  uint8_t* astage;  // activation stages (after the arena)
  uint64_t* bars;   // [2 regions][kMaxChunks] weight mbarriers, then [kAStages] activation ones
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
  const int m = p.m, n0 = tile * c.bn, kbeg = split * c.ks, nst = c.ks / kKC;
  const bf16* a = ActIn(p, phase) + kbeg;
  const uint32_t abase = Smem(sm.astage), wbase = Smem(sm.arena + c.region_off);
  const uint32_t bars = Smem(sm.bars + region * kMaxChunks);
  const uint32_t abars = Smem(sm.bars + 2 * kMaxChunks);
  const bool atma = p.acts_tma != 0;
  const int arow = atma ? kBoxK * 2 : kARow, axm = atma ? 7 : 0;
  const CUtensorMap* amap = &p.amap[phase == 0 ? kShapes : s];
  if (atma && threadIdx.x == 0) FenceProxyAsyncGlobal();  // inputs written before the barrier

  auto load_a = [&](int kb) {
    const uint32_t st = abase + (kb % kAStages) * p.astage_bytes;
    if (atma) {  // one box [M x 64 k]; the stage's last readers finished (a __syncthreads)
      if (threadIdx.x == 0) {
        const uint32_t bar = abars + 8 * (kb % kAStages);
        FenceProxyAsync();
        MbarExpectTx(bar, static_cast<unsigned>(m * kBoxK * 2));
        TmaG2S2d(st, amap, kbeg + kb * kKC, 0, bar);
      }
      return;
    }
    for (int i = threadIdx.x; i < m * 8; i += kThreads) {
      const int r = i / 8, ch = i % 8;
      CpAsync16(st + r * kARow + ch * 16, a + static_cast<size_t>(r) * c.lda + kb * kKC + ch * 8);
    }
  };

  float acc[MTW][NBW][4];
#pragma unroll
  for (int i = 0; i < MTW; ++i)
#pragma unroll
    for (int j = 0; j < NBW; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
  for (int st = 0; st < kAStages - 1; ++st) {
    if (st < nst) load_a(st);
    CpCommit();
  }
  const int frow = fg * MTW * 16, tblk = tg * NBW;
  for (int kb = 0; kb < nst; ++kb) {
    CpWait<kAStages - 2>();
    if (atma) {  // activation stage kb landed (parity bits 16.. of wpar)
      const int bit = 16 + kb % kAStages;
      MbarWait(abars + 8 * (kb % kAStages), (wpar >> bit) & 1u);
      wpar ^= 1u << bit;
    }
    if ((kb * kKC) % c.wchunk == 0) {  // first stage of weight chunk ch: wait for it to land
      const int ch = kb * kKC / c.wchunk, bit = region * kMaxChunks + ch;
      MbarWait(bars + 8 * ch, (wpar >> bit) & 1u);
      wpar ^= 1u << bit;
    }
    __syncthreads();  // stage kb landed for all threads; stage kb - 1 is no longer read
    if (kb + kAStages - 1 < nst) load_a(kb + kAStages - 1);
    CpCommit();
    const uint32_t ast = abase + (kb % kAStages) * p.astage_bytes;
#pragma unroll
    for (int kk = 0; kk < kKC / 16; ++kk) {
      if ((kb * (kKC / 16) + kk) % c.wk != kg) continue;
      const int kw = kb * kKC + kk * 16;  // k within the unit's slice
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
        Ldsm2(ast + TokenByte(arow, axm, tblk * 8 + b.row, kk * 2 + b.k / 8), b0, b1);
#pragma unroll
        for (int i = 0; i < MTW; ++i) Mma(acc[i][0], af[i], b0, b1);
      } else {
#pragma unroll
        for (int j = 0; j < NBW; j += 2) {
          // matrices: n8 block j x k 0-7, x k 8-15, then block j + 1 likewise
          uint32_t b[4];
          const RowK t = LdsmTokens(lane);
          Ldsm4(ast + TokenByte(arow, axm, (tblk + j) * 8 + t.row, kk * 2 + t.k / 8), b);
#pragma unroll
          for (int i = 0; i < MTW; ++i) {
            Mma(acc[i][j], af[i], b[0], b[1]);
            Mma(acc[i][j + 1], af[i], b[2], b[3]);
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
    PROBE_CASE(1, 1)
    PROBE_CASE(1, 2) PROBE_CASE(1, 4) PROBE_CASE(1, 8) PROBE_CASE(2, 1) PROBE_CASE(2, 2)
        PROBE_CASE(2, 4) PROBE_CASE(2, 8) PROBE_CASE(3, 1) PROBE_CASE(3, 2) PROBE_CASE(3, 4)
            PROBE_CASE(3, 8)
#undef PROBE_CASE
                default : __trap();
  }
}

// The splits CTAs of each of this CTA's tiles meet on the tile's counter; each then reduces its
// share of the tile: sum of all parts in index order, bf16 out.
__device__ void ReduceTiles(const Params& p, int phase) {
  const int s = ShapeOf(phase);
  const PhaseCfg& c = p.cfg[s];
  const int m = p.m;
  unsigned* cnt = p.tile_cnt + static_cast<size_t>(phase) * kMaxTiles;
  __syncthreads();  // every thread's partial stores are done
  if (threadIdx.x == 0) {
    __threadfence();
    for (int u = blockIdx.x; u < c.units; u += gridDim.x) RedRelease(cnt + u / c.splits, 1);
  }
  for (int u = blockIdx.x; u < c.units; u += gridDim.x) {
    int tile, split;
    UnitCoords(c, u, &tile, &split);
    if (threadIdx.x == 0) {
      const long long t0 = clock64();
      while (LdAcquire(cnt + tile) < static_cast<unsigned>(c.splits)) SpinGuard(t0);
    }
    __syncthreads();
    int g0, g1;
    ReduceShare(c, m, split, &g0, &g1);
    const int gpr = c.bn / 4;  // float4 groups per token row of the tile
    for (int gi = g0 + static_cast<int>(threadIdx.x); gi < g1; gi += kThreads) {
      const int tok = gi / gpr, f = tile * c.bn + (gi % gpr) * 4;
      const size_t off = static_cast<size_t>(tok) * c.n + f;
      float4 sum = __ldcg(reinterpret_cast<const float4*>(p.ws + off));
      for (int pi = 1; pi < c.parts; ++pi) {
        const float4 v =
            __ldcg(reinterpret_cast<const float4*>(p.ws + static_cast<size_t>(pi) * m * c.n + off));
        sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
      }
      __align__(8) __nv_bfloat162 o[2] = {__floats2bfloat162_rn(sum.x, sum.y),
                                          __floats2bfloat162_rn(sum.z, sum.w)};
      *reinterpret_cast<uint2*>(p.act[s] + off) = *reinterpret_cast<const uint2*>(o);
    }
  }
}

// The tensor maps live in the (grid-constant) parameter space: cp.async.bulk.tensor takes their
// generic address; no copy of them is ever written, so no fence.proxy.tensormap is needed.
__global__ void __launch_bounds__(kThreads, 1)
    PersistentChainKernel(const __grid_constant__ Params p) {
  extern __shared__ __align__(1024) uint8_t dyn_smem[];
  __shared__ __align__(8) uint64_t bars[2 * kMaxChunks + kAStages];
  // 128B-swizzled boxes need 1024-B aligned destinations: round the arena up (kArenaSlack).
  uint8_t* const arena =
      dyn_smem + ((kSwzAlign - (Smem(dyn_smem) & (kSwzAlign - 1))) & (kSwzAlign - 1));
  const Shared sm{arena, arena + p.arena_bytes, bars};
  if (threadIdx.x < 2 * kMaxChunks + kAStages) MbarInit(Smem(&bars[threadIdx.x]), 1);
  if (threadIdx.x == 0 && p.cfg[0].tma)
    for (int s = 0; s < kShapes; ++s) PrefetchTensorMap(&p.tmap[s]);
  if (threadIdx.x == 0 && p.acts_tma)
    for (int s = 0; s <= kShapes; ++s) PrefetchTensorMap(&p.amap[s]);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncthreads();

  const int phases = p.layers * kShapes, d = p.prefetch;
  cg::grid_group grid = cg::this_grid();
  uint32_t wpar = 0;  // expected mbarrier parities: weight chunks (bits 0-15), act stages (16..)
  auto first_unit = [&](int ph) { return static_cast<int>(blockIdx.x) < p.cfg[ShapeOf(ph)].units; };
  for (int ph = 0; ph < d && ph < phases; ++ph)
    if (first_unit(ph)) IssueWeights(p, sm, ph, blockIdx.x);

  unsigned long long* stamp =
      p.stamps ? p.stamps + static_cast<size_t>(blockIdx.x) * phases * 3 : nullptr;
  for (int ph = 0; ph < phases; ++ph) {
    const PhaseCfg& c = p.cfg[ShapeOf(ph)];
    if (stamp && threadIdx.x == 0) stamp[ph * 3 + 0] = GlobalTimer();
    if (d == 0 && first_unit(ph)) IssueWeights(p, sm, ph, blockIdx.x);
    for (int u = blockIdx.x; u < c.units; u += gridDim.x) {
      if (u != static_cast<int>(blockIdx.x)) {  // a second unit of this phase: same region
        __syncthreads();
        IssueWeights(p, sm, ph, u);
      }
      DispatchUnit(p, sm, ph, u, wpar);
    }
    if (stamp && threadIdx.x == 0) stamp[ph * 3 + 1] = GlobalTimer();
    if (c.parts > 1) ReduceTiles(p, ph);
    if (stamp && threadIdx.x == 0) stamp[ph * 3 + 2] = GlobalTimer();
    if (ph + 1 == phases) break;
    if (d > 0 && ph + d < phases && first_unit(ph + d)) {
      __syncthreads();  // d = 2: this phase's region is reused by phase ph + 2
      IssueWeights(p, sm, ph + d, blockIdx.x);
    }
    if (p.acts_tma) FenceProxyAsyncGlobal();  // this thread's output stores, before the release
    if (p.use_cg)
      grid.sync();
    else
      GridBarrier(p.bar, static_cast<unsigned>(ph));
  }
}
#endif  // sm_90+

}  // namespace probe
