#include "model/cpu_fast.h"

namespace petal {

StatusOr<std::unique_ptr<CpuModel>> LoadFastCpuModel(const ModelConfig& config,
                                                     const WeightStore& weights,
                                                     cpu::CpuPrecision precision) {
  if (precision == cpu::CpuPrecision::kBf16) {
    return Unimplemented(
        "bf16 CPU GEMMs are not available in this build (oneDNN 2.6's GEMM entry points are fp32 "
        "and int8)");
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
