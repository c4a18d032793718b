// Multi-vector (late interaction: ColBERT / PyLate) outputs on the CPU: the model's Dense
// projection applied to every token's final hidden state, each token's vector L2-normalised (as
// PyLate's encode does by default), and the key lengths that keep query expansion tokens out of
// every token's attention (docs/models.md "Multi-vector models"). Thread-safety: a loaded
// TokenProjection is immutable; Apply() may run on several threads at once.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "engine/batch.h"
#include "model/config.h"

namespace petal {

class TokenProjection {
 public:
  // Reads each Dense module's linear.weight [out, in] (and linear.bias [out]) from its folder's
  // model.safetensors (config.multivector.dense, in order), as fp32.
  static StatusOr<TokenProjection> Load(const ModelConfig& config);
  // out[t] = normalize(Dense_n(... Dense_1(hidden[t]))) for `tokens` rows of hidden_size floats;
  // out is [tokens, OutputDim()]; normalize is x / max(||x||, 1e-12) (torch's normalize).
  void Apply(const float* hidden, int tokens, float* out) const;
  int out_dim() const { return layers_.empty() ? 0 : layers_.back().out; }

  struct Layer {
    int in = 0, out = 0;
    std::vector<float> weight, bias;  // [out, in], [out] (empty: no bias)
  };
  // The modules in order (the CUDA forward uploads them).
  const std::vector<Layer>& layers() const { return layers_; }

 private:
  std::vector<Layer> layers_;
};

// The batch's key lengths for a multi-vector model that does not attend to its query expansion
// tokens (attend_to_expansion_tokens false): per sequence, its length minus its trailing run of
// mask tokens (at least 1), which is PyLate's attention mask for a query padded with mask tokens.
// Empty (everything attends to everything) for other models or when no sequence ends in masks.
std::vector<int32_t> MultiVectorKeyLengths(const ModelConfig& config, const Batch& batch);

}  // namespace petal
