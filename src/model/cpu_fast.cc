#include "model/cpu_fast.h"

#include <string>

namespace petal {

StatusOr<std::unique_ptr<CpuModel>> LoadFastCpuModel(const ModelConfig& config,
                                                     const WeightStore& weights,
                                                     cpu::CpuPrecision precision) {
  std::string why;
  if (precision == cpu::CpuPrecision::kBf16 && !cpu::HaveBf16Gemm(&why)) {
    return FailedPrecondition("--cpu-precision bf16: " + why);
  }
  switch (config.architecture) {
    case Architecture::kBert:
      return LoadBertFastCpuModel(config, weights, precision);
    case Architecture::kQwen3:
      return LoadQwen3FastCpuModel(config, weights, precision);
    default:
      return Unimplemented(std::string("no fast CPU forward for architecture '") +
                           ArchitectureName(config.architecture) + "'");
  }
}

}  // namespace petal
