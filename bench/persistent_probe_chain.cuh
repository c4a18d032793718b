// Device side of bench/persistent_probe.cu, part 4: the split-K reduction of a phase's tiles and
// the persistent 112-GEMM kernel (one cooperative launch, grid barrier between phases).
#pragma once
#include "persistent_probe_unit.cuh"

namespace probe {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
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
  __shared__ __align__(8) uint64_t bars[2 * kMaxChunks + kMaxAStages];
  // 128B-swizzled boxes need 1024-B aligned destinations: round the arena up (kArenaSlack).
  uint8_t* const arena =
      dyn_smem + ((kSwzAlign - (Smem(dyn_smem) & (kSwzAlign - 1))) & (kSwzAlign - 1));
  const Shared sm{arena, arena + p.arena_bytes, bars};
  if (threadIdx.x < 2 * kMaxChunks + kMaxAStages) MbarInit(Smem(&bars[threadIdx.x]), 1);
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
