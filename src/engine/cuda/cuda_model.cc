#include "engine/cuda/cuda_model.h"

namespace petal::cuda {

StatusOr<std::unique_ptr<CudaModel>> CreateCudaModel(const ModelConfig& config,
                                                     const WeightStore& store, Capacity cap) {
  if (cap.max_tokens <= 0 || cap.max_seqs <= 0) {
    return InvalidArgument("engine capacity must be positive (max_tokens, max_seqs)");
  }
  switch (config.architecture) {
    case Architecture::kBert:
      return CreateBertCudaModel(config, store, cap);
    case Architecture::kQwen3:
      return CreateQwen3CudaModel(config, store, cap);
  }
  return Unimplemented(std::string("no CUDA implementation for architecture '") +
                       ArchitectureName(config.architecture) + "'");
}

}  // namespace petal::cuda
