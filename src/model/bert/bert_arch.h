// The BERT family's registry hooks (src/model/registry.cc): BERT and XLM-RoBERTa encoders
// (all-MiniLM, bge, e5, gte, multilingual-e5, bge-m3 dense). Config extras live in
// bert_config.cc, the CPU forward in bert.cc, the CUDA forward in bert_cuda.cc.
// Thread-safety: pure functions.
#pragma once

#include "model/registry.h"

namespace petal {

bool DetectBert(const ConfigFields& config_json);
Status ParseBertExtras(const ConfigFields& config_json, ModelConfig* c);
double BertParameterCount(const ModelConfig& c);
std::vector<CheckpointTensor> BertCheckpointTensors(const ModelConfig& c);
StatusOr<std::unique_ptr<CpuModel>> LoadBertCpuModel(const ModelConfig& config,
                                                     const WeightStore& weights);
namespace cuda {
StatusOr<std::unique_ptr<CudaModel>> CreateBertCudaModel(const ModelConfig& config,
                                                         const WeightStore& store, Capacity cap);
}  // namespace cuda

}  // namespace petal
