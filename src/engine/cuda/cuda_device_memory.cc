// CudaMemoryInfo (cuda_engine.h): a device's free and total memory, for start-up checks.
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

}  // namespace petal
