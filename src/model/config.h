// ModelConfig: one typed view of a Hugging Face model folder (config.json plus the
// sentence-transformers files modules.json, 1_Pooling/config.json, sentence_bert_config.json,
// config_sentence_transformers.json, and Petal's own optional petal_config.json). Which keys are
// read, per family, is docs/models.md; the architecture-specific ones are read by the entry of
// src/model/registry.h. Thread-safety: plain value type.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"

namespace petal {

enum class Architecture { kBert, kQwen3 };
enum class PoolingMode { kMean, kCls, kLastToken };
enum class AttentionMask { kBidirectional, kCausal };
enum class Activation { kGelu, kGeluTanh, kSilu };
// How the model's own int8 output is defined: kLinear is Petal's per-row scaled int8; kTanh is
// round(127 * tanh(x)) of the pooled state (pplx-embed-v1's native int8; binary is its sign).
enum class Int8Mode { kLinear, kTanh };

const char* ArchitectureName(Architecture a);
const char* PoolingModeName(PoolingMode p);
const char* AttentionMaskName(AttentionMask m);
const char* Int8ModeName(Int8Mode m);

struct ModelConfig {
  std::string model_dir;
  std::string hf_architecture;  // e.g. "BertModel", "Qwen3Model", as config.json says
  std::string model_type;       // e.g. "bert", "xlm-roberta", "bidirectional_pplx_qwen3"
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
  // BERT family: first position id (XLM-RoBERTa numbers positions from pad_token_id + 1).
  int position_offset = 0;
  // Qwen3 decoder family variants: q/k projection biases, per-head RMSNorm of q and k.
  bool attention_bias = false;
  bool qk_norm = true;

  PoolingMode pooling = PoolingMode::kMean;
  bool normalize = false;  // L2-normalise pooled embeddings
  AttentionMask mask = AttentionMask::kBidirectional;
  // Longest input in tokens, special tokens included, as sentence-transformers truncates it
  // (max_seq_length in sentence_bert_config.json), capped by max_position_embeddings.
  int max_seq_length = 0;
  Int8Mode int8_mode = Int8Mode::kLinear;
  // config_sentence_transformers.json: instruction prompts by name (prepended to the text before
  // tokenizing) and the one applied when a request names none ("" = none).
  std::map<std::string, std::string> prompts;
  std::string default_prompt_name;

  // Parameter count implied by the shapes (embeddings included).
  int64_t ParameterCount() const;
};

// Parses `dir`/config.json and the sentence-transformers files. Unsupported architectures and
// missing or invalid fields fail with the field named.
StatusOr<ModelConfig> LoadModelConfig(const std::string& dir);
// Parses config from JSON text (for tests and fuzzing); sentence-transformers files are not read.
StatusOr<ModelConfig> ParseModelConfig(const std::string& config_json);

}  // namespace petal
