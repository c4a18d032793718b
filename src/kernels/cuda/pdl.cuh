// Programmatic dependent launch (PDL, Hopper+) for our kernels: a kernel launched with
// LaunchPdl may be scheduled while the kernel before it on the stream is still finishing, so its
// launch latency overlaps that kernel's tail (also inside CUDA graphs, where capture records a
// programmatic edge). Every kernel launched this way MUST call PdlWait() before it touches global
// memory (reads or writes): the wait returns once the previous kernel has completed and its
// writes are visible. It is a no-op below sm_90 and when the launch had no PDL attribute. Our
// kernels do not trigger their dependents early (griddepcontrol.launch_dependents at the start of
// every kernel measured 4-8% slower at batch 1 on the H200, bench/results/2026-12-01-latency/), so
// the next kernel is released as each CTA exits.
//
// PDL is off by default: on the H200 it measured neutral at batch 1 (1 x 128 p50 1.147-1.151 ms
// with, 1.137-1.145 ms without; bench/results/2026-12-01-latency/). PETAL_PDL=1 in the
// environment turns it on for the whole process (read once). Thread-safety: LaunchPdl is as
// thread-safe as a kernel launch; PdlEnabled's first call initialises a function-local static.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <utility>

namespace petal::cuda {

__device__ __forceinline__ void PdlWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether the device current at the first call has compute capability >= 9.0 (PDL, clusters).
// Cached for the process: Petal does not mix GPU generations in one process.
inline bool DeviceIsHopperOrNewer() {
  static const bool yes = [] {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return major >= 9;
  }();
  return yes;
}

inline bool PdlEnabled() {
  static const bool on = [] {
    const char* v = std::getenv("PETAL_PDL");
    return v && v[0] == '1' && DeviceIsHopperOrNewer();
  }();
  return on;
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
