#include "model/model.h"

namespace petal {

StatusOr<std::unique_ptr<CpuModel>> LoadCpuModel(const ModelConfig& config,
                                                 const WeightStore& weights) {
  switch (config.architecture) {
    case Architecture::kBert:
      return LoadBertCpuModel(config, weights);
    case Architecture::kQwen3:
      return LoadQwen3CpuModel(config, weights);
  }
  return Unimplemented(std::string("no CPU implementation for architecture '") +
                       ArchitectureName(config.architecture) + "'");
}

}  // namespace petal
