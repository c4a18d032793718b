// BERT-family encoders (all-MiniLM-L6-v2, bge, e5, gte; XLM-RoBERTa: multilingual-e5, bge-m3
// dense): the weights as one struct,
// loaded from a Hugging Face checkpoint, and the fp32 CPU forward pass over a ragged batch.
// BertWeights is public because the CUDA engine uploads the same struct (in bf16) to the GPU.
// Thread-safety: BertWeights is a plain value; a loaded BertCpuModel is immutable and its
// Forward() may run on several threads at once (scratch buffers are per call).
#pragma once

#include <memory>
#include <vector>

#include "common/status.h"
#include "model/config.h"
#include "model/model.h"
#include "model/safetensors.h"

namespace petal {

// One encoder layer, fp32, PyTorch Linear layout [out_features, in_features].
struct BertLayerWeights {
  // Query, key and value projections fused at load: rows [0,H) are q, [H,2H) k, [2H,3H) v, so
  // one GEMM yields a [tokens, 3H] buffer whose q/k/v the attention reads with stride 3H.
  std::vector<float> qkv_weight;       // [3H, H]
  std::vector<float> qkv_bias;         // [3H]
  std::vector<float> attn_out_weight;  // [H, H]   attention.output.dense
  std::vector<float> attn_out_bias;    // [H]
  std::vector<float> attn_norm_gamma;  // [H]      attention.output.LayerNorm
  std::vector<float> attn_norm_beta;   // [H]
  std::vector<float> ffn_in_weight;    // [I, H]   intermediate.dense
  std::vector<float> ffn_in_bias;      // [I]
  std::vector<float> ffn_out_weight;   // [H, I]   output.dense
  std::vector<float> ffn_out_bias;     // [H]
  std::vector<float> ffn_norm_gamma;   // [H]      output.LayerNorm
  std::vector<float> ffn_norm_beta;    // [H]
};

struct BertWeights {
  std::vector<float> word_embeddings;        // [vocab, H]
  std::vector<float> position_embeddings;    // [max_position_embeddings, H]
  std::vector<float> token_type_embeddings;  // [type_vocab_size, H]; empty if type_vocab_size == 0
  std::vector<float> embed_norm_gamma;       // [H]
  std::vector<float> embed_norm_beta;        // [H]
  std::vector<BertLayerWeights> layers;      // num_layers
  // Cross-encoders and classifiers only (config.HasHead()): the sequence-classification head on
  // the first token. BERT: pooler.dense + tanh, then classifier; XLM-R: classifier.dense + tanh,
  // then classifier.out_proj. N = config.score_outputs (1, or num_labels). Empty for embedders.
  std::vector<float> head_dense_weight;  // [H, H]
  std::vector<float> head_dense_bias;    // [H]
  std::vector<float> head_out_weight;    // [N, H]
  std::vector<float> head_out_bias;      // [N]
  // Sparse (SPLADE) models only (ScoreHead::kBertMlmSplade): BertForMaskedLM's
  // cls.predictions.transform (dense + GELU + LayerNorm) and the decoder's bias; the decoder
  // weight is word_embeddings (tied) unless the checkpoint stores cls.predictions.decoder.weight.
  std::vector<float> mlm_dense_weight;  // [H, H]
  std::vector<float> mlm_dense_bias;    // [H]
  std::vector<float> mlm_norm_gamma;    // [H]
  std::vector<float> mlm_norm_beta;     // [H]
  std::vector<float> mlm_decoder;       // [vocab, H]; empty: tied to word_embeddings
  std::vector<float> mlm_bias;          // [vocab]
};

// Reads every tensor the encoder needs (names with or without the "bert." prefix; LayerNorm
// gamma/beta accepted for weight/bias) and fuses Q/K/V. A missing or mis-shaped tensor fails
// with its checkpoint name. Unused tensors (pooler, position_ids) are ignored.
StatusOr<BertWeights> LoadBertWeights(const ModelConfig& config, const WeightStore& weights);

class BertCpuModel final : public CpuModel {
 public:
  BertCpuModel(ModelConfig config, BertWeights weights);
  const ModelConfig& config() const override { return config_; }
  const BertWeights& weights() const { return weights_; }
  // Final hidden states [tokens, H]. Positions restart at position_offset (0 for BERT) for every
  // sequence; token types are batch.token_type_ids or 0. Fails if a sequence is longer than
  // max_position_embeddings - position_offset.
  Status Forward(const Batch& batch, std::vector<float>* hidden) const override;
  // The classification head on pooled first-token states: out = W2 tanh(W1 x + b1) + b2.
  Status Score(const float* pooled, int rows, float* logits) const override;
  // SPLADE: per sequence, max over its tokens of log(1 + relu(MLM logits)); [seqs, vocab].
  Status SparsePool(const Batch& batch, const float* hidden, float* out) const override;

 private:
  ModelConfig config_;
  BertWeights weights_;
};

}  // namespace petal
