// Device side of bench/persistent_probe.cu, part 5 (--modes pdl): the same 112 GEMM phases as
// the persistent kernel, but one ordinary launch per phase, chained by programmatic dependent
// launch (PDL) in a CUDA graph. Each CTA takes one unit (grid = units), issues its weight slice
// into shared memory FIRST (weights never depend on an earlier kernel), may trigger its
// dependents (griddepcontrol.launch_dependents), and only then waits for the previous phase
// (griddepcontrol.wait: returns when the previous grid has completed and its writes are
// visible). With the trigger, the next phase's CTAs can become resident beside this phase's (two
// CTAs a SM where shared memory allows: see PdlPhaseKernel), each phase's dynamic shared memory holds only its own
// region) and stream their weights while this phase computes. The question: does hiding the weight
// ramp behind the previous kernel beat cuBLASLt's graph, where the persistent kernel did not?
#pragma once
#include "persistent_probe_chain.cuh"

namespace probe {

constexpr int kPdlStamps = 4;        // per CTA per phase: start, wait returned, GEMM done, end
constexpr int kPdlMaxCtas = 2 * kMaxTiles;  // stamp rows per phase

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
__device__ __forceinline__ void PdlTrigger() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ __forceinline__ void PdlWait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// One phase. p: the host's per-shape copy (region_off 0, arena_bytes = this shape's region);
// stamps: optional [phases][kPdlMaxCtas][kPdlStamps] globaltimer values. kMinBlocks 2 caps the
// registers at 128 so that two CTAs (this phase's and the next one's) fit a SM; the large warp
// tiles of M = 128 then spill, so the host takes kMinBlocks 1 where shared memory allows only one
// CTA a SM anyway.
template <int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    PdlPhaseKernel(const __grid_constant__ Params p, int phase, int trigger,
                   unsigned long long* stamps) {
  extern __shared__ __align__(1024) uint8_t dyn_smem[];
  __shared__ __align__(8) uint64_t bars[2 * kMaxChunks + kMaxAStages];
  const unsigned long long t0 = GlobalTimer();
  uint8_t* const arena =
      dyn_smem + ((kSwzAlign - (Smem(dyn_smem) & (kSwzAlign - 1))) & (kSwzAlign - 1));
  const Shared sm{arena, arena + p.arena_bytes, bars};
  const int s = ShapeOf(phase);
  if (threadIdx.x < 2 * kMaxChunks + kMaxAStages) MbarInit(Smem(&bars[threadIdx.x]), 1);
  if (threadIdx.x == 0 && p.cfg[s].tma) PrefetchTensorMap(&p.tmap[s]);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncthreads();
  IssueWeights(p, sm, phase, blockIdx.x);  // constant data: safe before the wait
  if (trigger) PdlTrigger();
  PdlWait();  // the previous phase's outputs (this phase's input, the workspace) are final
  const unsigned long long t1 = GlobalTimer();
  uint32_t wpar = 0;
  DispatchUnit(p, sm, phase, blockIdx.x, wpar);
  const unsigned long long t2 = GlobalTimer();
  if (p.cfg[s].parts > 1) ReduceTiles(p, phase);
  if (stamps && threadIdx.x == 0) {
    unsigned long long* o =
        stamps + (static_cast<size_t>(phase) * kPdlMaxCtas + blockIdx.x) * kPdlStamps;
    o[0] = t0, o[1] = t1, o[2] = t2, o[3] = GlobalTimer();
  }
}
#endif  // sm_90+

}  // namespace probe
