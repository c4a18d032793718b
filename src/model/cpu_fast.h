// The fast CPU forwards (BERT family and Qwen3): the same functions as the fp32 reference
// forwards in bert.cc / qwen3.cc, built from cpu::Linear (oneDNN GEMMs, fp32 or int8, bias and
// activation fused), cpu::BlockedAttention (no [L, L] scores) and the fused norm passes of
// cpu_fused.h. The reference forwards stay the numerical reference they are tested against.
// Thread-safety: a loaded model is immutable; Forward() may run on several threads at once.
#pragma once

#include <memory>

#include "common/status.h"
#include "kernels/cpu/cpu_linear.h"
#include "model/config.h"
#include "model/model.h"
#include "model/safetensors.h"

namespace petal {

// The architecture's fast CPU model in `precision`; Unimplemented for an architecture without one
// or a precision this build cannot run (bf16), so that callers can fall back to the reference.
StatusOr<std::unique_ptr<CpuModel>> LoadFastCpuModel(const ModelConfig& config,
                                                     const WeightStore& weights,
                                                     cpu::CpuPrecision precision);

StatusOr<std::unique_ptr<CpuModel>> LoadBertFastCpuModel(const ModelConfig& config,
                                                         const WeightStore& weights,
                                                         cpu::CpuPrecision precision);
StatusOr<std::unique_ptr<CpuModel>> LoadQwen3FastCpuModel(const ModelConfig& config,
                                                          const WeightStore& weights,
                                                          cpu::CpuPrecision precision);

}  // namespace petal
