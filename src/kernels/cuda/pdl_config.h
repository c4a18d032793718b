// Host side of programmatic dependent launch (pdl.cuh): whether this process launches with the
// PDL attribute (PETAL_PDL=1 on a Hopper or newer GPU). Plain C++, so that host-only files (the
// CUTLASS dispatch) can ask. Thread-safety: each function's first call initialises a
// function-local static; later calls only read it.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>

namespace petal::cuda {

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

}  // namespace petal::cuda
