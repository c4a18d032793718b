// The BERT family's fast CPU forward (see model/cpu_fast.h): the reference BertCpuModel owns the
// embeddings, norms and score head; each layer's four dense layers are packed once at load (and
// their loaded copies freed).
#include <cmath>
#include <string>

#include "kernels/cpu/cpu_attention.h"
#include "kernels/cpu/cpu_fused.h"
#include "model/bert/bert.h"
#include "model/cpu_fast.h"

namespace petal {
namespace {

struct PackedBertLayer {
  cpu::Linear qkv, attn_out, ffn_in, ffn_out;
};

class BertFastCpuModel final : public CpuModel {
 public:
  BertFastCpuModel(std::unique_ptr<BertCpuModel> ref, std::vector<PackedBertLayer> layers)
      : ref_(std::move(ref)), layers_(std::move(layers)) {}

  const ModelConfig& config() const override { return ref_->config(); }
  Status Score(const float* pooled, int rows, float* logits) const override {
    return ref_->Score(pooled, rows, logits);
  }
  Status SparsePool(const Batch& batch, const float* hidden, float* out) const override {
    return ref_->SparsePool(batch, hidden, out);
  }

  Status Forward(const Batch& batch, std::vector<float>* hidden) const override {
    const ModelConfig& c = config();
    const BertWeights& w = ref_->weights();
    const int T = batch.num_tokens(), H = c.hidden_size, I = c.intermediate_size;
    const int S = batch.num_seqs();
    const bool typed = !batch.token_type_ids.empty();
    const int types = std::max(c.type_vocab_size, 1);
    for (int s = 0; s < S; ++s) {
      if (batch.seq_len(s) > c.max_position_embeddings - c.position_offset) {
        return InvalidArgument("sequence " + std::to_string(s) + " has " +
                               std::to_string(batch.seq_len(s)) + " tokens; the model has " +
                               std::to_string(c.max_position_embeddings - c.position_offset) +
                               " positions");
      }
    }
    for (int t = 0; typed && t < T; ++t) {
      if (batch.token_type_ids[t] < 0 || batch.token_type_ids[t] >= types) {
        return InvalidArgument("token type id " + std::to_string(batch.token_type_ids[t]) +
                               " at position " + std::to_string(t) + " is outside [0, " +
                               std::to_string(types) + ")");
      }
    }
    hidden->clear();
    if (T == 0) return Status::Ok();

    // The residual stream, copied to *hidden at the end; it and the activations live in per-thread
    // buffers kept across calls (64-byte aligned: oneDNN takes the same paths call to call).
    float* const x = cpu::ThreadBuffer(5, static_cast<size_t>(T) * H);
    for (int s = 0; s < S; ++s) {
      const int begin = batch.cu_seqlens[s], end = batch.cu_seqlens[s + 1];
      for (int t = begin; t < end; ++t) {
        const int type = typed ? batch.token_type_ids[t] : 0;
        const float* word = w.word_embeddings.data() + int64_t{batch.token_ids[t]} * H;
        const float* pos =
            w.position_embeddings.data() + int64_t{c.position_offset + t - begin} * H;
        const float* tt = w.token_type_embeddings.empty()
                              ? nullptr
                              : w.token_type_embeddings.data() + int64_t{type} * H;
        float* row = x + int64_t{t} * H;
        if (tt) {  // (not `tt ? tt[i] : 0` in the loop: GCC makes it masked loads from null)
          for (int i = 0; i < H; ++i) row[i] = word[i] + pos[i] + tt[i];
        } else {
          for (int i = 0; i < H; ++i) row[i] = word[i] + pos[i];
        }
      }
    }
    // bf16: the norms also write the next GEMM's input in bf16, the GELU GEMM writes bf16 for
    // the FFN-out GEMM and the attention writes bf16 for the output projection (the same
    // roundings those GEMMs would do on fp32 inputs).
    const bool bf16 =
        layers_.empty() ? false : layers_[0].qkv.precision() == cpu::CpuPrecision::kBf16;
    uint16_t* const xb = bf16 ? reinterpret_cast<uint16_t*>(
                                    cpu::ThreadBuffer(6, (static_cast<size_t>(T) * H + 1) / 2))
                              : nullptr;
    cpu::AddLayerNorm(x, nullptr, w.embed_norm_gamma.data(), w.embed_norm_beta.data(), c.norm_eps,
                      T, H, xb);

    float* const qkv = cpu::ThreadBuffer(1, static_cast<size_t>(T) * 3 * H);
    float* const ctx = cpu::ThreadBuffer(2, static_cast<size_t>(T) * H);
    float* const proj = cpu::ThreadBuffer(3, static_cast<size_t>(T) * H);
    float* const inter = cpu::ThreadBuffer(4, static_cast<size_t>(T) * I);
    const int d = c.head_dim;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    for (size_t l = 0; l < layers_.size(); ++l) {
      const PackedBertLayer& p = layers_[l];
      const BertLayerWeights& lw = w.layers[l];
      const int32_t* kv_lens = batch.key_lengths.empty() ? nullptr : batch.key_lengths.data();
      if (bf16) {
        // q, k and v leave the GEMM in bf16 (the attention rounds them to bf16 anyway: the same
        // values, half the bytes), the attention (AVX512-BF16 where the CPU has it) writes bf16.
        uint16_t* const qb = reinterpret_cast<uint16_t*>(qkv);  // bf16 [T, 3H] in the fp32 buffer
        uint16_t* const cb = reinterpret_cast<uint16_t*>(ctx);  // bf16 [T, H] in the fp32 buffer
        p.qkv.ForwardBf16Out(xb, T, qb);
        cpu::BlockedAttentionBf16(qb, 3 * H, qb + H, 3 * H, qb + 2 * H, 3 * H, nullptr, cb,
                                  batch.cu_seqlens.data(), S, c.num_heads, c.num_heads, d,
                                  /*causal=*/false, scale, kv_lens);
        p.attn_out.ForwardBf16(cb, T, proj);
      } else {
        p.qkv.Forward(x, T, qkv);
        cpu::BlockedAttention(qkv, 3 * H, qkv + H, 3 * H, qkv + 2 * H, 3 * H, ctx,
                              batch.cu_seqlens.data(), S, c.num_heads, c.num_heads, d,
                              /*causal=*/false, scale, kv_lens);
        p.attn_out.Forward(ctx, T, proj);
      }
      cpu::AddLayerNorm(x, proj, lw.attn_norm_gamma.data(), lw.attn_norm_beta.data(), c.norm_eps, T,
                        H, xb);
      if (bf16) {
        uint16_t* const ib = reinterpret_cast<uint16_t*>(inter);  // bf16 [T, I] in the fp32 buffer
        p.ffn_in.ForwardBf16Out(xb, T, ib, cpu::Epilogue::kGelu);
        p.ffn_out.ForwardBf16(ib, T, proj);
      } else {
        p.ffn_in.Forward(x, T, inter, cpu::Epilogue::kGelu);
        p.ffn_out.Forward(inter, T, proj);
      }
      cpu::AddLayerNorm(x, proj, lw.ffn_norm_gamma.data(), lw.ffn_norm_beta.data(), c.norm_eps, T,
                        H, xb);
    }
    hidden->assign(x, x + static_cast<size_t>(T) * H);
    return Status::Ok();
  }

 private:
  std::unique_ptr<BertCpuModel> ref_;
  std::vector<PackedBertLayer> layers_;
};

}  // namespace

StatusOr<std::unique_ptr<CpuModel>> LoadBertFastCpuModel(const ModelConfig& config,
                                                         const WeightStore& weights,
                                                         cpu::CpuPrecision precision) {
  PETAL_ASSIGN_OR_RETURN(BertWeights w, LoadBertWeights(config, weights));
  const int H = config.hidden_size, I = config.intermediate_size;
  std::vector<PackedBertLayer> layers(w.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    BertLayerWeights& lw = w.layers[l];
    PackedBertLayer& p = layers[l];
    PETAL_ASSIGN_OR_RETURN(
        p.qkv, cpu::Linear::Pack(lw.qkv_weight.data(), lw.qkv_bias.data(), 3 * H, H, precision));
    PETAL_ASSIGN_OR_RETURN(p.attn_out, cpu::Linear::Pack(lw.attn_out_weight.data(),
                                                         lw.attn_out_bias.data(), H, H, precision));
    PETAL_ASSIGN_OR_RETURN(p.ffn_in, cpu::Linear::Pack(lw.ffn_in_weight.data(),
                                                       lw.ffn_in_bias.data(), I, H, precision));
    PETAL_ASSIGN_OR_RETURN(p.ffn_out, cpu::Linear::Pack(lw.ffn_out_weight.data(),
                                                        lw.ffn_out_bias.data(), H, I, precision));
    // Packed copies hold these now; the reference model below keeps only embeddings, norms and
    // the score head (its own Forward is never called).
    for (auto* v : {&lw.qkv_weight, &lw.attn_out_weight, &lw.ffn_in_weight, &lw.ffn_out_weight})
      std::vector<float>().swap(*v);
  }
  auto ref = std::make_unique<BertCpuModel>(config, std::move(w));
  return std::unique_ptr<CpuModel>(new BertFastCpuModel(std::move(ref), std::move(layers)));
}

}  // namespace petal
