// The CUDA engine's entry points in a build without CUDA: always unavailable.
#include "engine/cuda/cuda_engine.h"

namespace petal {

StatusOr<std::unique_ptr<Engine>> CreateCudaEngine(const std::string&, const CudaEngineOptions&) {
  return Unavailable("this petal binary was built without CUDA (configure with the 'cuda' preset)");
}

bool CudaAvailable() { return false; }

int CudaDeviceCount() { return 0; }

std::string CudaDeviceName(int) { return "none"; }

Status CudaMemoryInfo(int, uint64_t*, uint64_t*) {
  return Unavailable("this petal binary was built without CUDA");
}

Status ResetCudaDevice(int) { return Unavailable("this petal binary was built without CUDA"); }

}  // namespace petal
