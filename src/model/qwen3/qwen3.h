// Qwen3 decoder used as an embedder (pplx-embed style: bidirectional + mean pooling;
// Qwen3-Embedding style: causal + last token). This header exposes the checkpoint tensor table and
// the loaded weights, so that the CPU model (qwen3.cc), the CUDA uploader (qwen3_cuda.cc) and
// `petal make-model` all agree on names, shapes and the fused layouts; the loader reads exactly
// the table. Thread-safety: plain value types and pure
// functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/config.h"
#include "model/safetensors.h"

namespace petal {

// What a checkpoint tensor is, so make-model can pick a realistic initialisation.
enum class Qwen3TensorKind { kEmbedding, kProjection, kNorm, kBias };

// One tensor of a Hugging Face Qwen3Model checkpoint, named without the "model." prefix.
struct Qwen3TensorSpec {
  std::string name;  // e.g. "layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;
  Qwen3TensorKind kind = Qwen3TensorKind::kProjection;
};

// Every tensor a Qwen3Model checkpoint of `config` holds, in HF order. With `attention_bias`,
// the q/k/v/o projection biases are listed too (HF's attention_bias=true); without
// config.qk_norm, the q/k norms are not.
std::vector<Qwen3TensorSpec> Qwen3CheckpointTensors(const ModelConfig& config, bool attention_bias);

struct Qwen3LayerWeights {
  std::vector<float> input_norm;  // [hidden]
  // q|k|v projections fused along the output dimension: [(Hq + 2*Hkv) * head_dim, hidden].
  std::vector<float> qkv;
  std::vector<float> qkv_bias;  // [(Hq + 2*Hkv) * head_dim], empty without attention_bias
  std::vector<float> q_norm;    // [head_dim], applied per head before rotary; empty without qk_norm
  std::vector<float> k_norm;    // [head_dim]; empty without qk_norm
  std::vector<float> o_proj;    // [hidden, Hq * head_dim]
  std::vector<float> o_bias;    // [hidden], empty without attention_bias
  std::vector<float> post_attention_norm;  // [hidden]
  std::vector<float> gate_up;              // gate rows then up rows: [2 * intermediate, hidden]
  std::vector<float> down;                 // [hidden, intermediate]
};

// Where a per-layer checkpoint tensor lands: `layer` and the field of Qwen3LayerWeights, for a
// table name "layers.N.SUFFIX" (without the "model." prefix); false for any other name or an
// unknown suffix. Tensors sharing a field are concatenated in Qwen3CheckpointTensors order,
// which fuses q|k|v (weights and biases) and gate|up. The CUDA forward maps the same fields to
// its device buffers (qwen3_cuda.cc).
using Qwen3LayerField = std::vector<float> Qwen3LayerWeights::*;
bool Qwen3LayerSlot(const std::string& name, size_t* layer, Qwen3LayerField* field);

struct Qwen3Weights {
  std::vector<float> embed_tokens;  // [vocab, hidden]
  std::vector<Qwen3LayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  bool attention_bias = false;
  // LM rerankers (config.score_head == kLmYesNo): the LM head's rows of the "yes" and "no"
  // tokens, [2, hidden] (from embed_tokens when tie_word_embeddings, else lm_head.weight; only
  // these two rows are ever read). Empty for embedders.
  std::vector<float> score_rows;
};

// Reads every tensor of Qwen3CheckpointTensors from `store` (names with or without the "model."
// prefix; the LM head is ignored except for an LM reranker's two score rows), fusing q/k/v and
// gate/up. A missing or mis-shaped tensor fails with its name. Biases are loaded when the
// checkpoint has them, and required when config.attention_bias is set.
StatusOr<Qwen3Weights> LoadQwen3Weights(const ModelConfig& config, const WeightStore& store);

}  // namespace petal
