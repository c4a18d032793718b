#include "model/model.h"

#include "model/factory.h"

namespace petal {

StatusOr<std::unique_ptr<CpuModel>> LoadCpuModel(const ModelConfig& config,
                                                 const WeightStore& weights) {
  return FindFactory(config.architecture).create_cpu(config, weights);
}

}  // namespace petal
