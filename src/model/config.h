// ModelConfig: one typed view of a Hugging Face model folder (config.json plus the
// sentence-transformers files modules.json, 1_Pooling/config.json, sentence_bert_config.json,
// and Petal's own optional petal_config.json). Thread-safety: plain value type.
#pragma once

#include <string>

#include "common/status.h"

namespace petal {

enum class Architecture { kBert, kQwen3 };
enum class PoolingMode { kMean, kCls, kLastToken };
enum class AttentionMask { kBidirectional, kCausal };
enum class Activation { kGelu, kGeluTanh, kSilu };

const char* ArchitectureName(Architecture a);
const char* PoolingModeName(PoolingMode p);
const char* AttentionMaskName(AttentionMask m);

struct ModelConfig {
  std::string model_dir;
  std::string hf_architecture;  // e.g. "BertModel", "Qwen3Model", as config.json says
  Architecture architecture = Architecture::kBert;

  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;  // == num_heads for BERT
  int head_dim = 0;
  int intermediate_size = 0;
  int vocab_size = 0;
  int max_position_embeddings = 0;
  int type_vocab_size = 0;  // BERT only
  float norm_eps = 1e-12f;
  double rope_theta = 10000.0;  // Qwen3 only
  Activation activation = Activation::kGelu;

  PoolingMode pooling = PoolingMode::kMean;
  bool normalize = false;  // L2-normalise pooled embeddings
  AttentionMask mask = AttentionMask::kBidirectional;
  // Longest input in tokens, special tokens included, as sentence-transformers truncates it
  // (max_seq_length in sentence_bert_config.json), capped by max_position_embeddings.
  int max_seq_length = 0;

  // Parameter count implied by the shapes (embeddings included).
  int64_t ParameterCount() const;
};

// Parses `dir`/config.json and the sentence-transformers files. Unsupported architectures and
// missing or invalid fields fail with the field named.
StatusOr<ModelConfig> LoadModelConfig(const std::string& dir);
// Parses config from JSON text (for tests and fuzzing); sentence-transformers files are not read.
StatusOr<ModelConfig> ParseModelConfig(const std::string& config_json);

}  // namespace petal
