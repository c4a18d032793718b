// `petal make-model`: writes a Hugging Face-layout Qwen3Model checkpoint (config.json,
// sentence-transformers files, petal_config.json, model.safetensors) with seeded random weights of
// realistic scale, for named shapes (the pplx-embed-v1 sizes and tiny test shapes). Real weights
// cannot be downloaded where Petal is built; these stand in for them with identical shapes.
// Weights are a pure function of (shape, seed, tensor name): integer-only PRNG arithmetic, so
// every machine writes the same bytes. Thread-safety: reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/config.h"
#include "model/safetensors.h"

namespace petal {

struct ModelShape {
  std::string name;
  int num_layers = 0;
  int hidden_size = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int intermediate_size = 0;
  int vocab_size = 0;
  int max_position_embeddings = 0;
  double rope_theta = 1e6;
  double rms_norm_eps = 1e-6;
};

// The named shapes, e.g. "pplx-embed-v1-0.6b", "pplx-embed-v1-4b", "qwen3-tiny".
const std::vector<ModelShape>& KnownModelShapes();
StatusOr<ModelShape> FindModelShape(const std::string& name);

struct MakeModelOptions {
  std::string shape = "qwen3-tiny";
  std::string out_dir;
  uint64_t seed = 0;
  DType dtype = DType::kBF16;  // kBF16 or kF32
  AttentionMask mask = AttentionMask::kBidirectional;
  // Defaults by mask: bidirectional -> mean (pplx-embed), causal -> last token (Qwen3-Embedding).
  PoolingMode pooling = PoolingMode::kMean;
  bool pooling_set = false;
  bool attention_bias = false;  // also write q/k/v/o biases (HF attention_bias=true)
  std::string tokenizer_path;   // copied to out_dir/tokenizer.json when set
};

// Creates `out_dir` (and parents) and writes the checkpoint into it.
Status MakeModel(const MakeModelOptions& options);

// The ModelConfig that a checkpoint of `shape` parses to (before the sentence-transformers files).
ModelConfig ConfigForShape(const ModelShape& shape);

// Fills `out` with `n` samples ~ approximately N(mean, std) for the stream keyed by (seed, key):
// sum of four uniform 24-bit integers (Irwin-Hall), exact integer arithmetic, then one scale.
void SeededNormal(uint64_t seed, const std::string& key, double mean, double std, float* out,
                  int64_t n);

}  // namespace petal
