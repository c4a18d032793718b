// Placeholder until the Bert CPU model lands.
#include "model/model.h"

namespace petal {

StatusOr<std::unique_ptr<CpuModel>> LoadBertCpuModel(const ModelConfig&, const WeightStore&) {
  return Unimplemented("bert CPU model is not implemented yet");
}

}  // namespace petal
