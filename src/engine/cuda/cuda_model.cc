#include "engine/cuda/cuda_model.h"

#include "model/factory.h"

namespace petal::cuda {

StatusOr<std::unique_ptr<CudaModel>> CreateCudaModel(const ModelConfig& config,
                                                     const WeightStore& store, Capacity cap) {
  if (cap.max_tokens <= 0 || cap.max_seqs <= 0) {
    return InvalidArgument("engine capacity must be positive (max_tokens, max_seqs)");
  }
  const ArchitectureFactory& arch = FindFactory(config.architecture);
  if (arch.create_cuda == nullptr) {
    return Unimplemented(std::string("no CUDA implementation for architecture '") +
                         ArchitectureName(config.architecture) + "'");
  }
  return arch.create_cuda(config, store, cap);
}

}  // namespace petal::cuda
