// The device queries of cuda_engine.h: how many devices, a device's name, its free and total
// memory (for start-up checks), and a device reset after a fault.
#include <cuda_runtime.h>

#include "engine/cuda/cuda_engine.h"

namespace petal {

Status CudaMemoryInfo(int device, uint64_t* free_bytes, uint64_t* total_bytes) {
  int previous = 0;
  cudaError_t e = cudaGetDevice(&previous);
  if (e == cudaSuccess) e = cudaSetDevice(device);
  size_t free_b = 0, total_b = 0;
  if (e == cudaSuccess) e = cudaMemGetInfo(&free_b, &total_b);
  cudaSetDevice(previous);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Unavailable("cudaMemGetInfo on device " + std::to_string(device) + ": " +
                       cudaGetErrorString(e));
  }
  *free_bytes = free_b;
  *total_bytes = total_b;
  return Status::Ok();
}

std::string CudaDeviceName(int device) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "none";
  return prop.name;
}

bool CudaAvailable() { return CudaDeviceCount() > 0; }

Status ResetCudaDevice(int device) {
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaDeviceReset();
  if (e != cudaSuccess) {
    return Internal("cudaDeviceReset on device " + std::to_string(device) + ": " +
                    cudaGetErrorString(e));
  }
  (void)cudaGetLastError();
  return Status::Ok();
}

int CudaDeviceCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

}  // namespace petal
