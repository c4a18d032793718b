#include "model/model.h"

#include "model/factory.h"

namespace petal {

Status CpuModel::Score(const float*, int, float*) const {
  return Unimplemented(std::string("the ") + ArchitectureName(config().architecture) +
                       " model has no score head (it is an embedder)");
}

Status CpuModel::SparsePool(const Batch&, const float*, float*) const {
  return Unimplemented(std::string("the ") + ArchitectureName(config().architecture) +
                       " model has no sparse (SPLADE) head");
}

Status CpuModel::ForwardObserved(const Batch& batch, std::vector<float>* hidden,
                                 ActivationObserver* observer) const {
  if (observer == nullptr) return Forward(batch, hidden);
  return Unimplemented(std::string("fp8 calibration is implemented for Qwen3 models, not ") +
                       ArchitectureName(config().architecture));
}

StatusOr<std::unique_ptr<CpuModel>> LoadCpuModel(const ModelConfig& config,
                                                 const WeightStore& weights) {
  return FindFactory(config.architecture).create_cpu(config, weights);
}

}  // namespace petal
