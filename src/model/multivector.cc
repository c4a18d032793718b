// The Dense projection and per-token normalisation of multi-vector models (see multivector.h).
#include "model/multivector.h"

#include <algorithm>
#include <cmath>

#include "common/file_util.h"
#include "kernels/cpu/ops.h"
#include "model/safetensors.h"

namespace petal {

StatusOr<TokenProjection> TokenProjection::Load(const ModelConfig& config) {
  TokenProjection p;
  if (config.task != ModelTask::kMultiVector || config.multivector.dense.empty()) {
    return InvalidArgument(config.model_dir + " is not a multi-vector model (no Dense module)");
  }
  for (const DenseModule& d : config.multivector.dense) {
    const std::string dir = JoinPath(config.model_dir, d.path);
    PETAL_ASSIGN_OR_RETURN(std::unique_ptr<WeightStore> store, WeightStore::Open(dir));
    Layer l;
    l.in = d.in_features;
    l.out = d.out_features;
    PETAL_ASSIGN_OR_RETURN(l.weight, store->ReadF32("linear.weight", {l.out, l.in}));
    if (d.bias) {
      PETAL_ASSIGN_OR_RETURN(l.bias, store->ReadF32("linear.bias", {l.out}));
    }
    p.layers_.push_back(std::move(l));
  }
  return p;
}

void TokenProjection::Apply(const float* hidden, int tokens, float* out) const {
  if (tokens <= 0 || layers_.empty()) return;
  std::vector<float> a, b;
  const float* x = hidden;
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    const bool last = i + 1 == layers_.size();
    float* y = out;
    if (!last) {
      std::vector<float>& buf = i % 2 == 0 ? a : b;
      buf.resize(static_cast<size_t>(tokens) * l.out);
      y = buf.data();
    }
    cpu::Gemm(x, l.weight.data(), l.bias.empty() ? nullptr : l.bias.data(), y, tokens, l.out, l.in);
    x = y;
  }
  const int d = out_dim();
  for (int t = 0; t < tokens; ++t) {
    float* row = out + static_cast<size_t>(t) * d;
    double ss = 0;
    for (int j = 0; j < d; ++j) ss += static_cast<double>(row[j]) * row[j];
    const float inv = 1.0f / static_cast<float>(std::max(std::sqrt(ss), 1e-12));
    for (int j = 0; j < d; ++j) row[j] *= inv;
  }
}

std::vector<int32_t> MultiVectorKeyLengths(const ModelConfig& config, const Batch& batch) {
  const MultiVectorConfig& mv = config.multivector;
  if (config.task != ModelTask::kMultiVector || mv.attend_to_expansion_tokens ||
      mv.mask_token_id < 0) {
    return {};
  }
  std::vector<int32_t> lens(batch.num_seqs());
  bool any = false;
  for (int s = 0; s < batch.num_seqs(); ++s) {
    const int begin = batch.cu_seqlens[s];
    int end = batch.cu_seqlens[s + 1];
    while (end - begin > 1 && batch.token_ids[end - 1] == mv.mask_token_id) --end;
    lens[s] = end - begin;
    any = any || end != batch.cu_seqlens[s + 1];
  }
  if (!any) return {};
  return lens;
}

}  // namespace petal
