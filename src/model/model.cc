#include "model/model.h"

#include "model/factory.h"

namespace petal {

Status CpuModel::Score(const float*, int, float*) const {
  return Unimplemented(std::string("the ") + ArchitectureName(config().architecture) +
                       " model has no score head (it is an embedder)");
}

StatusOr<std::unique_ptr<CpuModel>> LoadCpuModel(const ModelConfig& config,
                                                 const WeightStore& weights) {
  return FindFactory(config.architecture).create_cpu(config, weights);
}

}  // namespace petal
