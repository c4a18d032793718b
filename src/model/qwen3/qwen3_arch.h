// The Qwen3 decoder family's registry hooks (src/model/registry.cc): Qwen3 checkpoints used as
// embedders (Qwen3-Embedding: causal + last token; pplx-embed-v1: bidirectional + mean). The
// variants (attention mask, q/k norm, attention bias) are ModelConfig fields, not separate
// architectures. Config extras live in qwen3_config.cc, the CPU forward in qwen3.cc, the CUDA
// forward in qwen3_cuda.cc. Thread-safety: pure functions.
#pragma once

#include "model/registry.h"

namespace petal {

bool DetectQwen3(const ConfigFields& config_json);
Status ParseQwen3Extras(const ConfigFields& config_json, ModelConfig* c);
double Qwen3ParameterCount(const ModelConfig& c);
// Qwen3CheckpointTensors (qwen3.h) with the config's own attention_bias.
std::vector<CheckpointTensor> Qwen3ConfigTensors(const ModelConfig& c);
StatusOr<std::unique_ptr<CpuModel>> LoadQwen3CpuModel(const ModelConfig& config,
                                                      const WeightStore& weights);
namespace cuda {
StatusOr<std::unique_ptr<CudaModel>> CreateQwen3CudaModel(const ModelConfig& config,
                                                          const WeightStore& store, Capacity cap);
}  // namespace cuda

}  // namespace petal
