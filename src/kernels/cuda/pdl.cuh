// Programmatic dependent launch (PDL, Hopper+) for our kernels: a kernel launched with
// LaunchPdl may be scheduled while the kernel before it on the stream is still finishing, so its
// launch latency overlaps that kernel's tail (also inside CUDA graphs, where capture records a
// programmatic edge). Every kernel launched this way MUST call PdlWait() before it touches global
// memory (reads or writes): the wait returns once the previous kernel has completed and its
// writes are visible. It is a no-op below sm_90 and when the launch had no PDL attribute. Our
// kernels do not trigger their dependents early, so the next kernel is released as each CTA exits.
//
// History:
// - Without an early release, PDL measured neutral at batch 1 on the H200 (1 x 128 p50
//   1.147-1.151 ms with, 1.137-1.145 ms without; bench/results/2026-12-01-latency/), since every
//   cuBLASLt GEMM between our kernels breaks the chain; a release at the very start of every
//   kernel measured 4-8% slower.
// - Session 18 released dependents right after the wait (griddepcontrol.launch_dependents in
//   every CTA): ~0.6 us a kernel boundary saved when PETAL_PDL=1 chained a layer, a net 1-2% at
//   0.6b 1 x 128 with CUTLASS GEMMs, a loss at 1 x 512 and at 4b. But the release is not free
//   when the launch has no PDL attribute (the default): in kernels of many short CTAs it cost
//   BERT's LayerNorm 45% (15.3 -> 22.2 us per 16,384-CTA launch, H100, ncu) and MiniLM
//   1024 x 128 5.5% of its throughput (session 25, bench/results/2026-12-07-session25/). Removed.
//
// PDL is off by default. PETAL_PDL=1 in the environment turns it on for the whole process (read
// once); with PETAL_GEMM_CUTLASS=prefer the GEMMs are CUTLASS kernels that join the chain.
// Thread-safety: LaunchPdl is as thread-safe as a kernel launch; PdlEnabled's first call
// initialises a function-local static.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/pdl_config.h"

namespace petal::cuda {

__device__ __forceinline__ void PdlWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...) with the PDL attribute when PdlEnabled().
template <typename... Params, typename... Args>
cudaError_t LaunchPdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                      cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = PdlEnabled() ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace petal::cuda
