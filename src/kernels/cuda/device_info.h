// The current CUDA device's id, SM count and whether it is a Hopper (sm_90), queried once per
// device and cached: the CUTLASS-based kernels (gemm_cutlass.cc, gemm_fused.cc) pass the SM count
// to their persistent schedulers and run only on sm_90. Thread-safety: the cache is guarded by a
// mutex; callers get copies.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <mutex>

namespace petal::cuda {

struct CudaDeviceInfo {
  int device = 0, sm_count = 0;
  bool hopper = false;  // compute capability 9.0
};

// Zeroed (hopper false) when no device can be queried.
inline CudaDeviceInfo CurrentCudaDevice() {
  static std::mutex mu;
  static std::map<int, CudaDeviceInfo> cache;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return {};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(dev);
  if (it != cache.end()) return it->second;
  CudaDeviceInfo d;
  d.device = dev;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, dev);
  d.hopper = major == 9 && minor == 0;
  cache[dev] = d;
  return d;
}

}  // namespace petal::cuda
