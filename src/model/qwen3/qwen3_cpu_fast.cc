// Qwen3's fast CPU forward (see model/cpu_fast.h): fused QKV, O, gate|up (SiLU*up fused into its
// epilogue) and down projections packed once at load; the residual add is fused into the next
// RMSNorm; rotary embedding from a per-forward cos/sin table; blocked attention (GQA, causal or
// bidirectional). The loaded copies of the packed projections are freed after packing.
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/cpu/cpu_attention.h"
#include "kernels/cpu/cpu_fused.h"
#include "kernels/cpu/ops.h"
#include "model/cpu_fast.h"
#include "model/qwen3/qwen3.h"

namespace petal {
namespace {

struct PackedQwen3Layer {
  cpu::Linear qkv, o, gate_up, down;
};

class Qwen3FastCpuModel final : public CpuModel {
 public:
  Qwen3FastCpuModel(ModelConfig config, Qwen3Weights w)
      : config_(std::move(config)), w_(std::move(w)) {}

  Status Pack(cpu::CpuPrecision precision) {
    const ModelConfig& c = config_;
    const int H = c.hidden_size, d = c.head_dim, I = c.intermediate_size;
    const int qkv_dim = (c.num_heads + 2 * c.num_kv_heads) * d;
    layers_.resize(w_.layers.size());
    for (size_t l = 0; l < w_.layers.size(); ++l) {
      Qwen3LayerWeights& L = w_.layers[l];
      PackedQwen3Layer& p = layers_[l];
      auto bias = [](const std::vector<float>& b) { return b.empty() ? nullptr : b.data(); };
      PETAL_ASSIGN_OR_RETURN(
          p.qkv, cpu::Linear::Pack(L.qkv.data(), bias(L.qkv_bias), qkv_dim, H, precision));
      PETAL_ASSIGN_OR_RETURN(
          p.o, cpu::Linear::Pack(L.o_proj.data(), bias(L.o_bias), H, c.num_heads * d, precision));
      PETAL_ASSIGN_OR_RETURN(p.gate_up,
                             cpu::Linear::Pack(L.gate_up.data(), nullptr, 2 * I, H, precision));
      PETAL_ASSIGN_OR_RETURN(p.down, cpu::Linear::Pack(L.down.data(), nullptr, H, I, precision));
      // The Linears hold their own (aligned or quantised) copies: the loaded ones are freed.
      for (auto* v : {&L.qkv, &L.o_proj, &L.gate_up, &L.down}) std::vector<float>().swap(*v);
    }
    return Status::Ok();
  }

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

    hidden->clear();
    // The residual stream (64-byte aligned, as every buffer here, so that the vectorised loops
    // and oneDNN take the same paths, and give the same bits, call to call), copied out at the end.
    float* const x = cpu::ThreadBuffer(5, static_cast<size_t>(T) * H);
    for (int t = 0; t < T; ++t) {
      const int id = batch.token_ids[t];
      if (id < 0 || id >= c.vocab_size) {
        return OutOfRange("token id " + std::to_string(id) + " at position " + std::to_string(t) +
                          " is outside the vocabulary of " + std::to_string(c.vocab_size));
      }
      std::memcpy(x + static_cast<size_t>(t) * H, &w_.embed_tokens[static_cast<size_t>(id) * H],
                  sizeof(float) * H);
    }
    if (T == 0) return Status::Ok();
    int max_len = 0;
    for (int s = 0; s < n; ++s) max_len = std::max(max_len, batch.seq_len(s));
    const cpu::RopeTable rope(max_len, d, c.rope_theta);

    float* const normed = cpu::ThreadBuffer(0, static_cast<size_t>(T) * H);
    float* const qkv = cpu::ThreadBuffer(1, static_cast<size_t>(T) * qkv_dim);
    float* const attn = cpu::ThreadBuffer(2, static_cast<size_t>(T) * hq * d);
    float* const proj = cpu::ThreadBuffer(3, static_cast<size_t>(T) * H);
    float* const act = cpu::ThreadBuffer(4, static_cast<size_t>(T) * I);
    const float* pending = nullptr;  // the last sublayer's output, not yet added to x
    const bool bf16 = !layers_.empty() && layers_[0].qkv.precision() == cpu::CpuPrecision::kBf16;
    for (size_t l = 0; l < layers_.size(); ++l) {
      const Qwen3LayerWeights& L = w_.layers[l];
      const PackedQwen3Layer& p = layers_[l];
      cpu::AddRmsNorm(x, pending, L.input_norm.data(), c.norm_eps, normed, T, H);
      p.qkv.Forward(normed, T, qkv);
      if (c.qk_norm) {
        cpu::HeadRmsNorm(qkv, qkv_dim, T, hq, d, L.q_norm.data(), c.norm_eps);
        cpu::HeadRmsNorm(qkv + hq * d, qkv_dim, T, hkv, d, L.k_norm.data(), c.norm_eps);
      }
      cpu::RopeQK(qkv, qkv_dim, hq, hkv, d, cu, n, rope);
      if (bf16) {  // bf16 attention (AVX512-BF16 where the CPU has it), its output in bf16
        uint16_t* const ab = reinterpret_cast<uint16_t*>(attn);  // bf16 in the fp32 buffer
        cpu::BlockedAttentionBf16(qkv, qkv_dim, qkv + hq * d, qkv_dim, qkv + (hq + hkv) * d,
                                  qkv_dim, nullptr, ab, cu, n, hq, hkv, d, causal, scale);
        p.o.ForwardBf16(ab, T, proj);
      } else {
        cpu::BlockedAttention(qkv, qkv_dim, qkv + hq * d, qkv_dim, qkv + (hq + hkv) * d, qkv_dim,
                              attn, cu, n, hq, hkv, d, causal, scale);
        p.o.Forward(attn, T, proj);
      }
      cpu::AddRmsNorm(x, proj, L.post_attention_norm.data(), c.norm_eps, normed, T, H);
      p.gate_up.Forward(normed, T, act, cpu::Epilogue::kSiluMul);
      p.down.Forward(act, T, proj);
      pending = proj;
    }
    cpu::AddRmsNorm(x, pending, w_.final_norm.data(), c.norm_eps, x, T, H);
    hidden->assign(x, x + static_cast<size_t>(T) * H);
    return Status::Ok();
  }

  Status Score(const float* pooled, int rows, float* logits) const override {
    if (w_.score_rows.empty()) return CpuModel::Score(pooled, rows, logits);
    cpu::Gemm(pooled, w_.score_rows.data(), nullptr, logits, rows, 2, config_.hidden_size);
    return Status::Ok();
  }

 private:
  ModelConfig config_;
  Qwen3Weights w_;
  std::vector<PackedQwen3Layer> layers_;
};

}  // namespace

StatusOr<std::unique_ptr<CpuModel>> LoadQwen3FastCpuModel(const ModelConfig& config,
                                                          const WeightStore& weights,
                                                          cpu::CpuPrecision precision) {
  PETAL_ASSIGN_OR_RETURN(Qwen3Weights w, LoadQwen3Weights(config, weights));
  auto m = std::make_unique<Qwen3FastCpuModel>(config, std::move(w));
  PETAL_RETURN_IF_ERROR(m->Pack(precision));
  return std::unique_ptr<CpuModel>(std::move(m));
}

}  // namespace petal
