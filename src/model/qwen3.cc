// Placeholder until the Qwen3 CPU model lands.
#include "model/model.h"

namespace petal {

StatusOr<std::unique_ptr<CpuModel>> LoadQwen3CpuModel(const ModelConfig&, const WeightStore&) {
  return Unimplemented("qwen3 CPU model is not implemented yet");
}

}  // namespace petal
