#include "model/model.h"

#include "model/registry.h"

namespace petal {

StatusOr<std::unique_ptr<CpuModel>> LoadCpuModel(const ModelConfig& config,
                                                 const WeightStore& weights) {
  return FindArchitecture(config.architecture).create_cpu(config, weights);
}

}  // namespace petal
