// Qwen3 checkpoint table, weight loading from that table (with q/k/v and gate/up fusion) and the
// fp32 CPU forward pass over a ragged batch.
#include "model/qwen3/qwen3.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/ops.h"
#include "model/model.h"
#include "model/qwen3/qwen3_arch.h"

namespace petal {

std::vector<Qwen3TensorSpec> Qwen3CheckpointTensors(const ModelConfig& c, bool attention_bias) {
  const int64_t h = c.hidden_size, d = c.head_dim, inter = c.intermediate_size;
  const int64_t q = c.num_heads * d, kv = c.num_kv_heads * d;
  using K = Qwen3TensorKind;
  std::vector<Qwen3TensorSpec> t;
  t.push_back({"embed_tokens.weight", {c.vocab_size, h}, K::kEmbedding});
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    t.push_back({p + "input_layernorm.weight", {h}, K::kNorm});
    t.push_back({p + "self_attn.q_proj.weight", {q, h}, K::kProjection});
    t.push_back({p + "self_attn.k_proj.weight", {kv, h}, K::kProjection});
    t.push_back({p + "self_attn.v_proj.weight", {kv, h}, K::kProjection});
    t.push_back({p + "self_attn.o_proj.weight", {h, q}, K::kProjection});
    if (attention_bias) {
      t.push_back({p + "self_attn.q_proj.bias", {q}, K::kBias});
      t.push_back({p + "self_attn.k_proj.bias", {kv}, K::kBias});
      t.push_back({p + "self_attn.v_proj.bias", {kv}, K::kBias});
      t.push_back({p + "self_attn.o_proj.bias", {h}, K::kBias});
    }
    if (c.qk_norm) {
      t.push_back({p + "self_attn.q_norm.weight", {d}, K::kNorm});
      t.push_back({p + "self_attn.k_norm.weight", {d}, K::kNorm});
    }
    t.push_back({p + "post_attention_layernorm.weight", {h}, K::kNorm});
    t.push_back({p + "mlp.gate_proj.weight", {inter, h}, K::kProjection});
    t.push_back({p + "mlp.up_proj.weight", {inter, h}, K::kProjection});
    t.push_back({p + "mlp.down_proj.weight", {h, inter}, K::kProjection});
  }
  t.push_back({"norm.weight", {h}, K::kNorm});
  return t;
}

std::vector<CheckpointTensor> Qwen3ConfigTensors(const ModelConfig& c) {
  std::vector<CheckpointTensor> out;
  for (Qwen3TensorSpec& s : Qwen3CheckpointTensors(c, c.attention_bias)) {
    out.push_back({std::move(s.name), std::move(s.shape), s.kind == Qwen3TensorKind::kNorm});
  }
  // An LM reranker with its own head: Qwen3ForCausalLM's lm_head.weight (never prefixed).
  if (c.score_head == ScoreHead::kLmYesNo && !c.tie_word_embeddings) {
    out.push_back({"lm_head.weight", {c.vocab_size, c.hidden_size}, false});
  }
  return out;
}

namespace {

// Resolves a table name to the checkpoint's spelling: bare (Qwen3Model) or "model."-prefixed
// (Qwen3ForCausalLM and most fine-tunes), so both load unchanged.
class NameResolver {
 public:
  explicit NameResolver(const WeightStore& store) : store_(store) {
    prefix_ = store.Find("embed_tokens.weight") == nullptr &&
                      store.Find("model.embed_tokens.weight") != nullptr
                  ? "model."
                  : "";
  }
  bool Has(const std::string& name) const { return store_.Find(prefix_ + name) != nullptr; }
  StatusOr<std::vector<float>> Read(const std::string& name, std::vector<int64_t> shape) const {
    return store_.ReadF32(prefix_ + name, shape);
  }

 private:
  const WeightStore& store_;
  std::string prefix_;
};

// Where each per-layer table entry lands (Qwen3LayerSlot).
struct LayerSlot {
  const char* suffix;  // the name after "layers.N."
  Qwen3LayerField field;
};
using LW = Qwen3LayerWeights;
constexpr LayerSlot kLayerSlots[] = {
    {"input_layernorm.weight", &LW::input_norm},
    {"self_attn.q_proj.weight", &LW::qkv},
    {"self_attn.k_proj.weight", &LW::qkv},
    {"self_attn.v_proj.weight", &LW::qkv},
    {"self_attn.o_proj.weight", &LW::o_proj},
    {"self_attn.q_proj.bias", &LW::qkv_bias},
    {"self_attn.k_proj.bias", &LW::qkv_bias},
    {"self_attn.v_proj.bias", &LW::qkv_bias},
    {"self_attn.o_proj.bias", &LW::o_bias},
    {"self_attn.q_norm.weight", &LW::q_norm},
    {"self_attn.k_norm.weight", &LW::k_norm},
    {"post_attention_layernorm.weight", &LW::post_attention_norm},
    {"mlp.gate_proj.weight", &LW::gate_up},
    {"mlp.up_proj.weight", &LW::gate_up},
    {"mlp.down_proj.weight", &LW::down},
};

// The field a table name lands in, or nullptr for a name the loader does not know.
std::vector<float>* Destination(const std::string& name, Qwen3Weights& w) {
  if (name == "embed_tokens.weight") return &w.embed_tokens;
  if (name == "norm.weight") return &w.final_norm;
  size_t layer = 0;
  Qwen3LayerField field = nullptr;
  if (!Qwen3LayerSlot(name, &layer, &field) || layer >= w.layers.size()) return nullptr;
  return &(w.layers[layer].*field);
}

}  // namespace

bool Qwen3LayerSlot(const std::string& name, size_t* layer, Qwen3LayerField* field) {
  if (name.rfind("layers.", 0) != 0) return false;
  const size_t dot = name.find('.', 7);
  if (dot == std::string::npos || dot == 7) return false;
  for (size_t i = 7; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  *layer = std::stoul(name.substr(7, dot - 7));
  const std::string suffix = name.substr(dot + 1);
  for (const LayerSlot& s : kLayerSlots) {
    if (suffix == s.suffix) {
      *field = s.field;
      return true;
    }
  }
  return false;
}

StatusOr<Qwen3Weights> LoadQwen3Weights(const ModelConfig& c, const WeightStore& store) {
  if (c.architecture != Architecture::kQwen3) {
    return InvalidArgument("LoadQwen3Weights: config is not a Qwen3 model");
  }
  NameResolver r(store);
  Qwen3Weights w;
  w.attention_bias = c.attention_bias || r.Has("layers.0.self_attn.q_proj.bias");
  w.layers.resize(c.num_layers);
  for (Qwen3TensorSpec& spec : Qwen3CheckpointTensors(c, w.attention_bias)) {
    std::vector<float>* dst = Destination(spec.name, w);
    if (dst == nullptr) return Internal("Qwen3 table entry '" + spec.name + "' has no field");
    PETAL_ASSIGN_OR_RETURN(std::vector<float> v, r.Read(spec.name, std::move(spec.shape)));
    if (dst->empty()) {
      *dst = std::move(v);
    } else {
      dst->insert(dst->end(), v.begin(), v.end());
    }
  }
  if (c.score_head == ScoreHead::kLmYesNo) {
    const int64_t h = c.hidden_size;
    if (c.tie_word_embeddings) {
      for (int id : {c.yes_token_id, c.no_token_id}) {
        w.score_rows.insert(w.score_rows.end(), w.embed_tokens.begin() + id * h,
                            w.embed_tokens.begin() + (id + 1) * h);
      }
    } else {
      if (store.Find("lm_head.weight") == nullptr) {
        return NotFound(
            "tensor 'lm_head.weight' is missing from the checkpoint (config.json "
            "'tie_word_embeddings' is false, so the reranker's yes/no rows come from it)");
      }
      PETAL_ASSIGN_OR_RETURN(w.score_rows, store.ReadRowsF32("lm_head.weight", {c.vocab_size, h},
                                                             {c.yes_token_id, c.no_token_id}));
    }
  }
  return w;
}

namespace {

class Qwen3CpuModel final : public CpuModel {
 public:
  Qwen3CpuModel(ModelConfig config, Qwen3Weights weights)
      : config_(std::move(config)), w_(std::move(weights)) {}

  const ModelConfig& config() const override { return config_; }

  Status Forward(const Batch& batch, std::vector<float>* hidden) const override {
    return ForwardObserved(batch, hidden, nullptr);
  }

  // `obs` (petal calibrate) sees the fp32 inputs of the four dense GEMMs of every layer.
  Status ForwardObserved(const Batch& batch, std::vector<float>* hidden,
                         ActivationObserver* obs) const override {
    const ModelConfig& c = config_;
    const int T = batch.num_tokens(), n = batch.num_seqs();
    const int H = c.hidden_size, d = c.head_dim, hq = c.num_heads, hkv = c.num_kv_heads;
    const int I = c.intermediate_size;
    const int qkv_dim = (hq + 2 * hkv) * d;
    const int32_t* cu = batch.cu_seqlens.data();
    const bool causal = c.mask == AttentionMask::kCausal;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));

    std::vector<float>& x = *hidden;  // the residual stream, [T, H]
    x.assign(static_cast<size_t>(T) * H, 0.0f);
    for (int t = 0; t < T; ++t) {
      const int id = batch.token_ids[t];
      if (id < 0 || id >= c.vocab_size) {
        return OutOfRange("token id " + std::to_string(id) + " at position " + std::to_string(t) +
                          " is outside the vocabulary of " + std::to_string(c.vocab_size));
      }
      std::memcpy(&x[static_cast<size_t>(t) * H], &w_.embed_tokens[static_cast<size_t>(id) * H],
                  sizeof(float) * H);
    }
    std::vector<float> normed(static_cast<size_t>(T) * H), qkv(static_cast<size_t>(T) * qkv_dim);
    std::vector<float> attn(static_cast<size_t>(T) * hq * d), proj(static_cast<size_t>(T) * H);
    std::vector<float> gate_up(static_cast<size_t>(T) * 2 * I), act(static_cast<size_t>(T) * I);

    for (size_t l = 0; l < w_.layers.size(); ++l) {
      const Qwen3LayerWeights& L = w_.layers[l];
      const int li = static_cast<int>(l);
      cpu::RmsNorm(x.data(), L.input_norm.data(), c.norm_eps, normed.data(), T, H);
      ObserveRows(obs, li, Fp8Input::kQkv, normed.data(), T, H);
      cpu::Gemm(normed.data(), L.qkv.data(), L.qkv_bias.empty() ? nullptr : L.qkv_bias.data(),
                qkv.data(), T, qkv_dim, H);
      // Qwen3's per-head RMSNorm on q and k (before rotary): each token row holds hq q-heads
      // then hkv k-heads, each head_dim wide, so one RmsNorm call per token covers a row.
      for (int t = 0; t < T && c.qk_norm; ++t) {
        float* row = qkv.data() + static_cast<size_t>(t) * qkv_dim;
        cpu::RmsNorm(row, L.q_norm.data(), c.norm_eps, row, hq, d);
        cpu::RmsNorm(row + hq * d, L.k_norm.data(), c.norm_eps, row + hq * d, hkv, d);
      }
      cpu::Rope(qkv.data(), qkv_dim, hq, d, cu, n, c.rope_theta);
      cpu::Rope(qkv.data() + hq * d, qkv_dim, hkv, d, cu, n, c.rope_theta);
      cpu::Attention(qkv.data(), qkv_dim, qkv.data() + hq * d, qkv_dim, qkv.data() + (hq + hkv) * d,
                     qkv_dim, attn.data(), cu, n, hq, hkv, d, causal, scale);
      ObserveRows(obs, li, Fp8Input::kO, attn.data(), T, hq * d);
      cpu::Gemm(attn.data(), L.o_proj.data(), L.o_bias.empty() ? nullptr : L.o_bias.data(),
                proj.data(), T, H, hq * d);
      cpu::AddInPlace(x.data(), proj.data(), static_cast<int64_t>(T) * H);

      cpu::RmsNorm(x.data(), L.post_attention_norm.data(), c.norm_eps, normed.data(), T, H);
      ObserveRows(obs, li, Fp8Input::kGateUp, normed.data(), T, H);
      cpu::Gemm(normed.data(), L.gate_up.data(), nullptr, gate_up.data(), T, 2 * I, H);
      cpu::SiluMul(gate_up.data(), act.data(), T, I);
      ObserveRows(obs, li, Fp8Input::kDown, act.data(), T, I);
      cpu::Gemm(act.data(), L.down.data(), nullptr, proj.data(), T, H, I);
      cpu::AddInPlace(x.data(), proj.data(), static_cast<int64_t>(T) * H);
    }
    cpu::RmsNorm(x.data(), w_.final_norm.data(), c.norm_eps, x.data(), T, H);
    return Status::Ok();
  }

  // LM reranker: logits of "yes" and "no" on the pooled (last-token, final-normed) state: a
  // [rows, 2] product with the two LM-head rows, never the whole vocabulary.
  Status Score(const float* pooled, int rows, float* logits) const override {
    if (w_.score_rows.empty()) return CpuModel::Score(pooled, rows, logits);
    cpu::Gemm(pooled, w_.score_rows.data(), nullptr, logits, rows, 2, config_.hidden_size);
    return Status::Ok();
  }

 private:
  ModelConfig config_;
  Qwen3Weights w_;
};

}  // namespace

StatusOr<std::unique_ptr<CpuModel>> LoadQwen3CpuModel(const ModelConfig& config,
                                                      const WeightStore& weights) {
  PETAL_ASSIGN_OR_RETURN(Qwen3Weights w, LoadQwen3Weights(config, weights));
  return std::unique_ptr<CpuModel>(new Qwen3CpuModel(config, std::move(w)));
}

}  // namespace petal
