// CpuModel: one model architecture's fp32 forward pass on the CPU, from a ragged Batch to the
// last hidden states. Each architecture lives in its own folder (src/model/<arch>/) and is
// listed in the registry (src/model/registry.h). Thread-safety: a loaded model is immutable;
// Forward() may be called from several threads at once.
#pragma once

#include <memory>
#include <vector>

#include "common/status.h"
#include "engine/batch.h"
#include "model/activation_observer.h"
#include "model/config.h"
#include "model/safetensors.h"

namespace petal {

class CpuModel {
 public:
  virtual ~CpuModel() = default;
  virtual const ModelConfig& config() const = 0;
  // Writes the final hidden states, [batch.num_tokens(), hidden_size] row-major, to `hidden`.
  // The batch has already been validated against the vocabulary and max length.
  virtual Status Forward(const Batch& batch, std::vector<float>* hidden) const = 0;
  // Forward, also reporting every fp8 GEMM input's per-token maxima to `observer` (petal
  // calibrate). Architectures without the hook (BERT) fail with Unimplemented unless `observer`
  // is null. Thread-safety as Forward; the observer is called from this thread.
  virtual Status ForwardObserved(const Batch& batch, std::vector<float>* hidden,
                                 ActivationObserver* observer) const;
  // Ranking models (config().task == kScore): the score head on `rows` pooled states
  // ([rows, hidden_size], pooled per config().pooling, not normalised), writing
  // [rows, config().score_outputs] logits. Embedders have no head (Unimplemented).
  virtual Status Score(const float* pooled, int rows, float* logits) const;
  // Sparse (SPLADE) models (config().task == kSparse): from the final hidden states
  // ([batch.num_tokens(), hidden_size]) to one [vocab_size] row per sequence, the max over its
  // tokens of log(1 + relu(MLM logits)), written to `out` ([num_seqs, vocab_size]). Other
  // models: Unimplemented.
  virtual Status SparsePool(const Batch& batch, const float* hidden, float* out) const;
};

// Loads the architecture named by `config` from `weights` (its registry entry's create_cpu).
StatusOr<std::unique_ptr<CpuModel>> LoadCpuModel(const ModelConfig& config,
                                                 const WeightStore& weights);

}  // namespace petal
