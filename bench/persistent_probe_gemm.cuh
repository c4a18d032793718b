// Device side of bench/persistent_probe.cu (see its header for what the probe is for), part 1:
// the design of the persistent kernel, the work decomposition (shared with the host self-check,
// so both use the same index math) and the kernel parameters. The PTX wrappers and grid barriers
// are in persistent_probe_sync.cuh, one unit's GEMM in persistent_probe_unit.cuh, the split-K
// reduction and the kernel in persistent_probe_chain.cuh.
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
//  - activations: [M x akc] stages (akc = --stage-k 64 | 128 | 256 k, default 64) through an
//    `astages`-stage pipeline (--stages 2..8, default 4), loaded only after the barrier, stage
//    stride StageBytes(M, akc) = M * (akc + 8) * 2 rounded up to 1024 B (the activation area starts
//    at the arena's end); the last stage of a unit may be shorter (AStageLen: ks need not be a
//    multiple of akc, only of 64). The loop over a stage walks it in 64-k sub-steps; a weight
//    chunk is waited for at the sub-step where it starts (a stage may span several chunks or a
//    fraction of one). cp.async (16-byte, .cg = L2 only), row stride (akc + 8) * 2 bytes
//    (conflict-free ldmatrix: akc / 8 + 1 = 1 mod 8 chunks); or, with Params::acts_tma (--acts
//    tma2d, experimental), akc / 64 2-D TMA boxes [M rows x 64 k] per stage from a map over the
//    input [M][lda], 128B swizzle, box b at stage + b * M * 128 (1024-B aligned), row stride 128 B
//    (ActByte), one mbarrier per stage for all of its boxes (parity in bits 16.. of wpar), stages
//    1024-B aligned. The inputs are other CTAs' generic-proxy stores: every thread fences
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
constexpr int kKC = 64;          // k per activation sub-step (and default --stage-k)
constexpr int kAStages = 4;      // default activation pipeline depth (--stages)
constexpr int kMaxAStages = 8;   // activation mbarriers
constexpr int kMaxStageK = 256;  // --stage-k 64 | 128 | 256
constexpr int kMaxChunks = 8;    // weight chunks (mbarriers) per region
constexpr int kMaxTiles = 256;   // tile counters per phase
constexpr int kShapes = 4;       // QKV, O, GU, DOWN
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
  int akc, astages;  // activation stage depth (k, multiple of 64) and pipeline stages (all shapes)
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
  int astage_bytes;  // activation stage stride: StageBytes(m, akc)
};

// cp.async stage row stride: akc + 8 bf16 (akc / 8 + 1 16-B chunks = 1 mod 8: conflict-free).
__host__ __device__ inline int ARow(int akc) { return (akc + 8) * 2; }
// Activation stage stride for M tokens: M rows of ARow(akc) bytes, rounded up to 1024 B (the
// --acts tma2d boxes of M x 128 B need 1024-B aligned stages; the arena is a multiple of 1024 B).
__host__ __device__ inline int StageBytes(int m, int akc) {
  return (m * ARow(akc) + kSwzAlign - 1) / kSwzAlign * kSwzAlign;
}
// Activation stages of one unit and the depth of stage kb (the last may be short; multiple of 64).
__host__ __device__ inline int AStagesOf(const PhaseCfg& c) { return (c.ks + c.akc - 1) / c.akc; }
__host__ __device__ inline int AStageLen(const PhaseCfg& c, int kb) {
  return c.ks - kb * c.akc < c.akc ? c.ks - kb * c.akc : c.akc;
}
// The weight chunk the main loop waits for at the 64-k sub-step starting at kw, or -1.
__host__ __device__ inline int WeightWaitChunk(const PhaseCfg& c, int kw) {
  return kw % c.wchunk ? -1 : kw / c.wchunk;
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
// Byte offset of token row `row`, k = 8 kc .. 8 kc + 7 of the stage (kc: 16-byte chunk) in an
// activation stage of depth akc. cp.async: padded rows (ARow(akc) bytes); --acts tma2d: akc / 64
// boxes [M x 64 k] with 128B swizzle, box kc / 8 at (kc / 8) * M * 128, in it chunk kc % 8 of row
// r stored at (kc % 8) ^ (r % 8) (boxes are 1024-B aligned: M % 8 == 0, stages 1024-B aligned).
__host__ __device__ inline int ActByte(int m, int akc, bool atma, int row, int kc) {
  if (atma) return (kc >> 3) * m * 128 + row * 128 + (((kc & 7) ^ (row & 7)) << 4);
  return row * ARow(akc) + (kc << 4);
}
// tma2d: destination (region-relative) of box kb and the weight chunk (mbarrier) it completes.
__host__ __device__ inline int BoxDst(const PhaseCfg& c, int kb) { return kb * c.bn * 128; }
__host__ __device__ inline int BoxChunk(const PhaseCfg& c, int kb) { return kb * kBoxK / c.wchunk; }
// Phase p reads act_in (row stride lda) and writes act[shape].
__host__ __device__ inline int ShapeOf(int phase) { return phase % kShapes; }

}  // namespace probe
