// BERT-family weights (the checkpoint table, Q/K/V fused at load) and the fp32 CPU forward pass.
#include "model/bert/bert.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cpu/ops.h"
#include "model/bert/bert_arch.h"

namespace petal {
namespace {

// Which config dimension a tensor axis has.
enum class Dim { kHidden, kInter, kVocab, kPos, kType, kLabels };

int64_t DimSize(const ModelConfig& c, Dim d) {
  switch (d) {
    case Dim::kHidden:
      return c.hidden_size;
    case Dim::kInter:
      return c.intermediate_size;
    case Dim::kVocab:
      return c.vocab_size;
    case Dim::kPos:
      return c.max_position_embeddings;
    case Dim::kType:
      return c.type_vocab_size;
    case Dim::kLabels:  // the head's output rows: 1 for a cross-encoder, num_labels for a
                        // classifier
      return c.score_outputs;
  }
  return 0;
}

// One checkpoint tensor and where it lands. A tensor that is one of `parts` fused blocks (Q/K/V)
// is copied to offset part * numel of a field sized parts * numel.
template <typename Owner>
struct TensorSpec {
  const char* name;  // without "bert." and, for layers, without "encoder.layer.N."
  std::vector<float> Owner::*field;
  std::vector<Dim> shape;
  int part = 0;
  int parts = 1;
};

using L = BertLayerWeights;
using W = BertWeights;
constexpr Dim kH = Dim::kHidden;
constexpr Dim kI = Dim::kInter;

const std::vector<TensorSpec<W>>& EmbeddingTable() {
  static const std::vector<TensorSpec<W>> t = {
      {"embeddings.word_embeddings.weight", &W::word_embeddings, {Dim::kVocab, kH}},
      {"embeddings.position_embeddings.weight", &W::position_embeddings, {Dim::kPos, kH}},
      {"embeddings.token_type_embeddings.weight", &W::token_type_embeddings, {Dim::kType, kH}},
      {"embeddings.LayerNorm.weight", &W::embed_norm_gamma, {kH}},
      {"embeddings.LayerNorm.bias", &W::embed_norm_beta, {kH}},
  };
  return t;
}

const std::vector<TensorSpec<L>>& LayerTable() {
  static const std::vector<TensorSpec<L>> t = {
      {"attention.self.query.weight", &L::qkv_weight, {kH, kH}, 0, 3},
      {"attention.self.key.weight", &L::qkv_weight, {kH, kH}, 1, 3},
      {"attention.self.value.weight", &L::qkv_weight, {kH, kH}, 2, 3},
      {"attention.self.query.bias", &L::qkv_bias, {kH}, 0, 3},
      {"attention.self.key.bias", &L::qkv_bias, {kH}, 1, 3},
      {"attention.self.value.bias", &L::qkv_bias, {kH}, 2, 3},
      {"attention.output.dense.weight", &L::attn_out_weight, {kH, kH}},
      {"attention.output.dense.bias", &L::attn_out_bias, {kH}},
      {"attention.output.LayerNorm.weight", &L::attn_norm_gamma, {kH}},
      {"attention.output.LayerNorm.bias", &L::attn_norm_beta, {kH}},
      {"intermediate.dense.weight", &L::ffn_in_weight, {kI, kH}},
      {"intermediate.dense.bias", &L::ffn_in_bias, {kI}},
      {"output.dense.weight", &L::ffn_out_weight, {kH, kI}},
      {"output.dense.bias", &L::ffn_out_bias, {kH}},
      {"output.LayerNorm.weight", &L::ffn_norm_gamma, {kH}},
      {"output.LayerNorm.bias", &L::ffn_norm_beta, {kH}},
  };
  return t;
}

// Whether a SPLADE model's masked-LM head is XLM-R's lm_head (XLMRobertaForMaskedLM), not BERT's
// cls.predictions.
bool XlmrMlmHead(const ModelConfig& c) {
  return c.score_head == ScoreHead::kBertMlmSplade && c.hf_architecture == "XLMRobertaForMaskedLM";
}

// The head tensors of a cross-encoder, classifier or SPLADE model, by its head kind (names as the
// task class stores them, without the encoder's "bert." / "roberta." prefix).
const std::vector<TensorSpec<W>>& HeadTable(const ModelConfig& c) {
  const ScoreHead head = c.score_head;
  static const std::vector<TensorSpec<W>> bert = {
      {"pooler.dense.weight", &W::head_dense_weight, {kH, kH}},
      {"pooler.dense.bias", &W::head_dense_bias, {kH}},
      {"classifier.weight", &W::head_out_weight, {Dim::kLabels, kH}},
      {"classifier.bias", &W::head_out_bias, {Dim::kLabels}},
  };
  static const std::vector<TensorSpec<W>> roberta = {
      {"classifier.dense.weight", &W::head_dense_weight, {kH, kH}},
      {"classifier.dense.bias", &W::head_dense_bias, {kH}},
      {"classifier.out_proj.weight", &W::head_out_weight, {Dim::kLabels, kH}},
      {"classifier.out_proj.bias", &W::head_out_bias, {Dim::kLabels}},
  };
  // SPLADE: BertForMaskedLM's prediction head (the decoder weight is read apart: it is usually
  // tied to the word embeddings and absent from the checkpoint).
  static const std::vector<TensorSpec<W>> mlm = {
      {"cls.predictions.transform.dense.weight", &W::mlm_dense_weight, {kH, kH}},
      {"cls.predictions.transform.dense.bias", &W::mlm_dense_bias, {kH}},
      {"cls.predictions.transform.LayerNorm.weight", &W::mlm_norm_gamma, {kH}},
      {"cls.predictions.transform.LayerNorm.bias", &W::mlm_norm_beta, {kH}},
      {"cls.predictions.bias", &W::mlm_bias, {Dim::kVocab}},
  };
  // XLMRobertaForMaskedLM's lm_head: the same dense + GELU + LayerNorm + decoder + bias (RoBERTa's
  // LMHead); lm_head.decoder.weight is tied to the word embeddings (read apart, as above) and
  // lm_head.decoder.bias to lm_head.bias.
  static const std::vector<TensorSpec<W>> xlmr_mlm = {
      {"lm_head.dense.weight", &W::mlm_dense_weight, {kH, kH}},
      {"lm_head.dense.bias", &W::mlm_dense_bias, {kH}},
      {"lm_head.layer_norm.weight", &W::mlm_norm_gamma, {kH}},
      {"lm_head.layer_norm.bias", &W::mlm_norm_beta, {kH}},
      {"lm_head.bias", &W::mlm_bias, {Dim::kVocab}},
  };
  static const std::vector<TensorSpec<W>> none;
  if (head == ScoreHead::kBertMlmSplade) return XlmrMlmHead(c) ? xlmr_mlm : mlm;
  if (head == ScoreHead::kBertPooler) return bert;
  if (head == ScoreHead::kRobertaClassifier) return roberta;
  return none;
}

// Replaces the trailing `from` of `s` with `to`, or returns "" if `s` does not end with it.
std::string ReplaceSuffix(const std::string& s, const std::string& from, const std::string& to) {
  if (s.size() < from.size() || s.compare(s.size() - from.size(), from.size(), from) != 0)
    return "";
  return s.substr(0, s.size() - from.size()) + to;
}

// The name under which `canonical` is stored: BertModel / XLMRobertaModel checkpoints have no
// prefix, BertForXxx ones prefix "bert." (XLMRobertaForXxx "roberta."), and TF-era conversions
// call LayerNorm's parameters gamma/beta.
std::string Resolve(const WeightStore& store, const std::string& canonical) {
  std::vector<std::string> names = {canonical};
  for (const auto& [from, to] : {std::pair{"LayerNorm.weight", "LayerNorm.gamma"},
                                 std::pair{"LayerNorm.bias", "LayerNorm.beta"}}) {
    std::string alias = ReplaceSuffix(canonical, from, to);
    if (!alias.empty()) names.push_back(alias);
  }
  const size_t n = names.size();
  for (const char* prefix : {"bert.", "roberta."}) {
    for (size_t i = 0; i < n; ++i) names.push_back(prefix + names[i]);
  }
  for (const auto& name : names) {
    if (store.Find(name) != nullptr) return name;
  }
  return "";
}

template <typename Owner>
Status ReadInto(const ModelConfig& c, const WeightStore& store, const std::string& prefix,
                const TensorSpec<Owner>& spec, Owner& owner) {
  const std::string canonical = prefix + spec.name;
  const std::string name = Resolve(store, canonical);
  if (name.empty()) {
    return NotFound("BERT checkpoint is missing tensor '" + canonical +
                    "' (also looked for it with a 'bert.' or 'roberta.' prefix and LayerNorm "
                    "gamma/beta names)");
  }
  std::vector<int64_t> shape;
  for (Dim d : spec.shape) shape.push_back(DimSize(c, d));
  PETAL_ASSIGN_OR_RETURN(std::vector<float> v, store.ReadF32(name, shape));
  std::vector<float>& dst = owner.*(spec.field);
  if (spec.parts == 1) {
    dst = std::move(v);
  } else {
    if (dst.size() != v.size() * spec.parts) dst.assign(v.size() * spec.parts, 0.0f);
    std::copy(v.begin(), v.end(), dst.begin() + static_cast<int64_t>(spec.part) * v.size());
  }
  return Status::Ok();
}

}  // namespace

std::vector<CheckpointTensor> BertCheckpointTensors(const ModelConfig& c) {
  auto shape = [&](const std::vector<Dim>& dims) {
    std::vector<int64_t> s;
    for (Dim d : dims) s.push_back(DimSize(c, d));
    return s;
  };
  auto is_norm = [](const std::string& name) {
    return name.size() > 16 && name.compare(name.size() - 16, 16, "LayerNorm.weight") == 0;
  };
  std::vector<CheckpointTensor> t;
  for (const auto& spec : EmbeddingTable()) {
    if (spec.field == &W::token_type_embeddings && c.type_vocab_size == 0) continue;
    t.push_back({spec.name, shape(spec.shape), is_norm(spec.name)});
  }
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string prefix = "encoder.layer." + std::to_string(l) + ".";
    for (const auto& spec : LayerTable()) {
      t.push_back({prefix + spec.name, shape(spec.shape), is_norm(spec.name)});
    }
  }
  for (const auto& spec : HeadTable(c)) {
    t.push_back({spec.name, shape(spec.shape), false});
  }
  return t;
}

StatusOr<BertWeights> LoadBertWeights(const ModelConfig& config, const WeightStore& store) {
  if (config.architecture != Architecture::kBert) {
    return InvalidArgument(std::string("LoadBertWeights called for architecture '") +
                           ArchitectureName(config.architecture) + "'");
  }
  BertWeights w;
  for (const auto& spec : EmbeddingTable()) {
    if (spec.field == &W::token_type_embeddings && config.type_vocab_size == 0) continue;
    PETAL_RETURN_IF_ERROR(ReadInto(config, store, "", spec, w));
  }
  w.layers.resize(config.num_layers);
  for (int l = 0; l < config.num_layers; ++l) {
    const std::string prefix = "encoder.layer." + std::to_string(l) + ".";
    for (const auto& spec : LayerTable()) {
      PETAL_RETURN_IF_ERROR(ReadInto(config, store, prefix, spec, w.layers[l]));
    }
  }
  for (const auto& spec : HeadTable(config)) {
    PETAL_RETURN_IF_ERROR(ReadInto(config, store, "", spec, w));
  }
  const char* decoder =
      XlmrMlmHead(config) ? "lm_head.decoder.weight" : "cls.predictions.decoder.weight";
  if (config.score_head == ScoreHead::kBertMlmSplade &&
      store.Find(decoder) != nullptr) {  // an untied decoder, or a tied one saved anyway
    PETAL_ASSIGN_OR_RETURN(w.mlm_decoder,
                           store.ReadF32(decoder, {config.vocab_size, config.hidden_size}));
  }
  return w;
}

StatusOr<std::unique_ptr<CpuModel>> LoadBertCpuModel(const ModelConfig& config,
                                                     const WeightStore& weights) {
  PETAL_ASSIGN_OR_RETURN(BertWeights w, LoadBertWeights(config, weights));
  return std::unique_ptr<CpuModel>(new BertCpuModel(config, std::move(w)));
}

BertCpuModel::BertCpuModel(ModelConfig config, BertWeights weights)
    : config_(std::move(config)), weights_(std::move(weights)) {}

Status BertCpuModel::Forward(const Batch& batch, std::vector<float>* hidden) const {
  const ModelConfig& c = config_;
  const int T = batch.num_tokens(), H = c.hidden_size, I = c.intermediate_size;
  const int S = batch.num_seqs();
  const bool typed = !batch.token_type_ids.empty();
  for (int s = 0; s < S; ++s) {
    if (batch.seq_len(s) > c.max_position_embeddings - c.position_offset) {
      return InvalidArgument("sequence " + std::to_string(s) + " has " +
                             std::to_string(batch.seq_len(s)) + " tokens; the model has " +
                             std::to_string(c.max_position_embeddings - c.position_offset) +
                             " positions");
    }
  }

  if (typed) {
    const int types = std::max(c.type_vocab_size, 1);  // type 0 is allowed without the table
    for (int t = 0; t < T; ++t) {
      if (batch.token_type_ids[t] < 0 || batch.token_type_ids[t] >= types) {
        return InvalidArgument("token type id " + std::to_string(batch.token_type_ids[t]) +
                               " at position " + std::to_string(t) + " is outside [0, " +
                               std::to_string(types) + ")");
      }
    }
  }
  hidden->clear();
  if (T == 0) return Status::Ok();

  // Embeddings: word + position (restarting per sequence, from position_offset) + token type,
  // then LayerNorm.
  std::vector<float>& x = *hidden;
  x.assign(static_cast<size_t>(T) * H, 0.0f);
  for (int s = 0; s < S; ++s) {
    const int begin = batch.cu_seqlens[s], end = batch.cu_seqlens[s + 1];
    for (int t = begin; t < end; ++t) {
      const int type = typed ? batch.token_type_ids[t] : 0;
      const float* word = weights_.word_embeddings.data() + int64_t{batch.token_ids[t]} * H;
      const float* pos =
          weights_.position_embeddings.data() + int64_t{c.position_offset + t - begin} * H;
      const float* tt = weights_.token_type_embeddings.empty()
                            ? nullptr
                            : weights_.token_type_embeddings.data() + int64_t{type} * H;
      float* row = x.data() + int64_t{t} * H;
      for (int i = 0; i < H; ++i) row[i] = word[i] + pos[i] + (tt ? tt[i] : 0.0f);
    }
  }
  cpu::LayerNorm(x.data(), weights_.embed_norm_gamma.data(), weights_.embed_norm_beta.data(),
                 c.norm_eps, x.data(), T, H);

  std::vector<float> qkv(static_cast<size_t>(T) * 3 * H);
  std::vector<float> ctx(static_cast<size_t>(T) * H);
  std::vector<float> proj(static_cast<size_t>(T) * H);
  std::vector<float> inter(static_cast<size_t>(T) * I);
  const int d = c.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (const BertLayerWeights& lw : weights_.layers) {
    cpu::Gemm(x.data(), lw.qkv_weight.data(), lw.qkv_bias.data(), qkv.data(), T, 3 * H, H);
    cpu::Attention(qkv.data(), 3 * H, qkv.data() + H, 3 * H, qkv.data() + 2 * H, 3 * H, ctx.data(),
                   batch.cu_seqlens.data(), S, c.num_heads, c.num_heads, d,
                   /*causal=*/false, scale,
                   batch.key_lengths.empty() ? nullptr : batch.key_lengths.data());
    cpu::Gemm(ctx.data(), lw.attn_out_weight.data(), lw.attn_out_bias.data(), proj.data(), T, H, H);
    // Post-norm residuals: x = LN(x + sublayer(x)).
    cpu::AddInPlace(x.data(), proj.data(), int64_t{T} * H);
    cpu::LayerNorm(x.data(), lw.attn_norm_gamma.data(), lw.attn_norm_beta.data(), c.norm_eps,
                   x.data(), T, H);
    cpu::Gemm(x.data(), lw.ffn_in_weight.data(), lw.ffn_in_bias.data(), inter.data(), T, I, H);
    cpu::Gelu(inter.data(), int64_t{T} * I);
    cpu::Gemm(inter.data(), lw.ffn_out_weight.data(), lw.ffn_out_bias.data(), proj.data(), T, H, I);
    cpu::AddInPlace(x.data(), proj.data(), int64_t{T} * H);
    cpu::LayerNorm(x.data(), lw.ffn_norm_gamma.data(), lw.ffn_norm_beta.data(), c.norm_eps,
                   x.data(), T, H);
  }
  return Status::Ok();
}

Status BertCpuModel::SparsePool(const Batch& batch, const float* hidden, float* out) const {
  if (config_.score_head != ScoreHead::kBertMlmSplade) {
    return CpuModel::SparsePool(batch, hidden, out);
  }
  const int H = config_.hidden_size, V = config_.vocab_size;
  const float* decoder =
      weights_.mlm_decoder.empty() ? weights_.word_embeddings.data() : weights_.mlm_decoder.data();
  // Tokens in blocks, so that the [block, vocab] logits stay small (30522 x 128 x 4 B = 16 MB).
  constexpr int kBlock = 128;
  std::vector<float> t(static_cast<size_t>(kBlock) * H), logits(static_cast<size_t>(kBlock) * V);
  for (int s = 0; s < batch.num_seqs(); ++s) {
    float* row = out + static_cast<int64_t>(s) * V;
    std::fill(row, row + V, 0.0f);  // log(1 + relu(x)) >= 0: 0 is the max of nothing
    for (int b = batch.cu_seqlens[s]; b < batch.cu_seqlens[s + 1]; b += kBlock) {
      const int n = std::min(kBlock, batch.cu_seqlens[s + 1] - b);
      cpu::Gemm(hidden + static_cast<int64_t>(b) * H, weights_.mlm_dense_weight.data(),
                weights_.mlm_dense_bias.data(), t.data(), n, H, H);
      cpu::Gelu(t.data(), int64_t{n} * H);
      cpu::LayerNorm(t.data(), weights_.mlm_norm_gamma.data(), weights_.mlm_norm_beta.data(),
                     config_.norm_eps, t.data(), n, H);
      cpu::Gemm(t.data(), decoder, weights_.mlm_bias.data(), logits.data(), n, V, H);
      for (int i = 0; i < n; ++i) {
        const float* l = logits.data() + static_cast<int64_t>(i) * V;
        for (int v = 0; v < V; ++v) {
          if (l[v] > 0) row[v] = std::max(row[v], std::log1p(l[v]));
        }
      }
    }
  }
  return Status::Ok();
}

Status BertCpuModel::Score(const float* pooled, int rows, float* logits) const {
  if (weights_.head_out_weight.empty()) return CpuModel::Score(pooled, rows, logits);
  const int H = config_.hidden_size;
  std::vector<float> mid(static_cast<size_t>(rows) * H);
  cpu::Gemm(pooled, weights_.head_dense_weight.data(), weights_.head_dense_bias.data(), mid.data(),
            rows, H, H);
  for (float& v : mid) v = std::tanh(v);
  cpu::Gemm(mid.data(), weights_.head_out_weight.data(), weights_.head_out_bias.data(), logits,
            rows, config_.score_outputs, H);
  return Status::Ok();
}

}  // namespace petal
