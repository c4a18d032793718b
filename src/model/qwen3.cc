// Qwen3 checkpoint table, weight loading (with q/k/v and gate/up fusion) and the fp32 CPU forward
// pass over a ragged batch.
#include "model/qwen3.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/file_util.h"
#include "kernels/cpu/ops.h"
#include "model/model.h"

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
    t.push_back({p + "self_attn.q_norm.weight", {d}, K::kNorm});
    t.push_back({p + "self_attn.k_norm.weight", {d}, K::kNorm});
    t.push_back({p + "post_attention_layernorm.weight", {h}, K::kNorm});
    t.push_back({p + "mlp.gate_proj.weight", {inter, h}, K::kProjection});
    t.push_back({p + "mlp.up_proj.weight", {inter, h}, K::kProjection});
    t.push_back({p + "mlp.down_proj.weight", {h, inter}, K::kProjection});
  }
  t.push_back({"norm.weight", {h}, K::kNorm});
  return t;
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

// Appends `name` (checked against `shape`) to `dst`; the fused tensors are built this way.
Status ReadAppend(const NameResolver& r, const std::string& name, std::vector<int64_t> shape,
                  std::vector<float>* dst) {
  PETAL_ASSIGN_OR_RETURN(std::vector<float> v, r.Read(name, std::move(shape)));
  if (dst->empty()) {
    *dst = std::move(v);
  } else {
    dst->insert(dst->end(), v.begin(), v.end());
  }
  return Status::Ok();
}

// Whether `dir`/config.json says attention_bias: true (the field ModelConfig does not carry).
bool ConfigSaysAttentionBias(const std::string& dir) {
  if (dir.empty()) return false;
  auto text = ReadFile(JoinPath(dir, "config.json"));
  if (!text.ok()) return false;
  simdjson::dom::parser parser;
  bool b = false;
  return parser.parse(*text)["attention_bias"].get_bool().get(b) == simdjson::SUCCESS && b;
}

}  // namespace

StatusOr<Qwen3Weights> LoadQwen3Weights(const ModelConfig& c, const WeightStore& store) {
  if (c.architecture != Architecture::kQwen3) {
    return InvalidArgument("LoadQwen3Weights: config is not a Qwen3 model");
  }
  NameResolver r(store);
  Qwen3Weights w;
  w.attention_bias =
      r.Has("layers.0.self_attn.q_proj.bias") || ConfigSaysAttentionBias(c.model_dir);
  const int64_t h = c.hidden_size, d = c.head_dim, inter = c.intermediate_size;
  const int64_t q = c.num_heads * d, kv = c.num_kv_heads * d;
  PETAL_ASSIGN_OR_RETURN(w.embed_tokens, r.Read("embed_tokens.weight", {c.vocab_size, h}));
  w.layers.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    Qwen3LayerWeights& L = w.layers[l];
    const std::string p = "layers." + std::to_string(l) + ".";
    PETAL_ASSIGN_OR_RETURN(L.input_norm, r.Read(p + "input_layernorm.weight", {h}));
    PETAL_RETURN_IF_ERROR(ReadAppend(r, p + "self_attn.q_proj.weight", {q, h}, &L.qkv));
    PETAL_RETURN_IF_ERROR(ReadAppend(r, p + "self_attn.k_proj.weight", {kv, h}, &L.qkv));
    PETAL_RETURN_IF_ERROR(ReadAppend(r, p + "self_attn.v_proj.weight", {kv, h}, &L.qkv));
    if (w.attention_bias) {
      PETAL_RETURN_IF_ERROR(ReadAppend(r, p + "self_attn.q_proj.bias", {q}, &L.qkv_bias));
      PETAL_RETURN_IF_ERROR(ReadAppend(r, p + "self_attn.k_proj.bias", {kv}, &L.qkv_bias));
      PETAL_RETURN_IF_ERROR(ReadAppend(r, p + "self_attn.v_proj.bias", {kv}, &L.qkv_bias));
      PETAL_ASSIGN_OR_RETURN(L.o_bias, r.Read(p + "self_attn.o_proj.bias", {h}));
    }
    PETAL_ASSIGN_OR_RETURN(L.q_norm, r.Read(p + "self_attn.q_norm.weight", {d}));
    PETAL_ASSIGN_OR_RETURN(L.k_norm, r.Read(p + "self_attn.k_norm.weight", {d}));
    PETAL_ASSIGN_OR_RETURN(L.o_proj, r.Read(p + "self_attn.o_proj.weight", {h, q}));
    PETAL_ASSIGN_OR_RETURN(L.post_attention_norm,
                           r.Read(p + "post_attention_layernorm.weight", {h}));
    PETAL_RETURN_IF_ERROR(ReadAppend(r, p + "mlp.gate_proj.weight", {inter, h}, &L.gate_up));
    PETAL_RETURN_IF_ERROR(ReadAppend(r, p + "mlp.up_proj.weight", {inter, h}, &L.gate_up));
    PETAL_ASSIGN_OR_RETURN(L.down, r.Read(p + "mlp.down_proj.weight", {h, inter}));
  }
  PETAL_ASSIGN_OR_RETURN(w.final_norm, r.Read("norm.weight", {h}));
  return w;
}

namespace {

class Qwen3CpuModel final : public CpuModel {
 public:
  Qwen3CpuModel(ModelConfig config, Qwen3Weights weights)
      : config_(std::move(config)), w_(std::move(weights)) {}

  const ModelConfig& config() const override { return config_; }

  Status Forward(const Batch& batch, std::vector<float>* hidden) const override {
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

    for (const Qwen3LayerWeights& L : w_.layers) {
      cpu::RmsNorm(x.data(), L.input_norm.data(), c.norm_eps, normed.data(), T, H);
      cpu::Gemm(normed.data(), L.qkv.data(), L.qkv_bias.empty() ? nullptr : L.qkv_bias.data(),
                qkv.data(), T, qkv_dim, H);
      // Qwen3's per-head RMSNorm on q and k (before rotary): each token row holds hq q-heads
      // then hkv k-heads, each head_dim wide, so one RmsNorm call per token covers a row.
      for (int t = 0; t < T; ++t) {
        float* row = qkv.data() + static_cast<size_t>(t) * qkv_dim;
        cpu::RmsNorm(row, L.q_norm.data(), c.norm_eps, row, hq, d);
        cpu::RmsNorm(row + hq * d, L.k_norm.data(), c.norm_eps, row + hq * d, hkv, d);
      }
      cpu::Rope(qkv.data(), qkv_dim, hq, d, cu, n, c.rope_theta);
      cpu::Rope(qkv.data() + hq * d, qkv_dim, hkv, d, cu, n, c.rope_theta);
      cpu::Attention(qkv.data(), qkv_dim, qkv.data() + hq * d, qkv_dim, qkv.data() + (hq + hkv) * d,
                     qkv_dim, attn.data(), cu, n, hq, hkv, d, causal, scale);
      cpu::Gemm(attn.data(), L.o_proj.data(), L.o_bias.empty() ? nullptr : L.o_bias.data(),
                proj.data(), T, H, hq * d);
      cpu::AddInPlace(x.data(), proj.data(), static_cast<int64_t>(T) * H);

      cpu::RmsNorm(x.data(), L.post_attention_norm.data(), c.norm_eps, normed.data(), T, H);
      cpu::Gemm(normed.data(), L.gate_up.data(), nullptr, gate_up.data(), T, 2 * I, H);
      cpu::SiluMul(gate_up.data(), act.data(), T, I);
      cpu::Gemm(act.data(), L.down.data(), nullptr, proj.data(), T, H, I);
      cpu::AddInPlace(x.data(), proj.data(), static_cast<int64_t>(T) * H);
    }
    cpu::RmsNorm(x.data(), w_.final_norm.data(), c.norm_eps, x.data(), T, H);
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
