// Qwen3CudaModel's forward pass (qwen3_cuda_model.h): qwen3.cc's in bf16 with cuBLASLt GEMMs
// and Petal's kernels, or fp8 dense layers. Pre-norm with a bf16 residual stream r:
//   x = RmsNorm(r); qkv = x Wqkv; q,k = rope(RmsNorm_head(q,k)); r += attn(q,k,v) Wo;
//   x = RmsNorm(r); r += (silu(x Wg) * x Wu) Wd;   final: RmsNorm(r), pooled.
// The residual adds are folded into the o_proj and down_proj GEMMs (their addend, in place). On
// the bf16 path the two pre-norms are folded too (ops.h, "RMSNorm folded into the next GEMM"):
// their weights are multiplied into Wqkv and Wgate_up at load, the GEMMs read r, and each token's
// 1/rms is applied by the QK-norm/rotary kernel and the SwiGLU kernel. Off by default
// (PETAL_FOLD_NORMS=1 turns it on): measured flat at batch 1 and 3% slower at 100 x 512 on the H200
// (docs/kernels.md).
#include <algorithm>
#include <cmath>

#include "kernels/cuda/score_ops.h"
#include "model/qwen3/qwen3_cuda_model.h"

namespace petal::cuda {

Status Qwen3CudaModel::Fp8Layer(const Qwen3LayerDev& L, int layer, AttentionParams& ap,
                                QkNormRopeParams& rp, int T, cudaStream_t stream) {
  auto st = [&](Fp8Input which) -> const float* {
    if (static_s_.size() == 0) return nullptr;
    return static_s_.get() + static_cast<size_t>(layer) * kFp8Inputs + static_cast<int>(which);
  };
  const int H = config_.hidden_size, I = config_.intermediate_size;
  const int Q = config_.num_heads * config_.head_dim;
  const int QKV = (config_.num_heads + 2 * config_.num_kv_heads) * config_.head_dim;
  auto gemm8 = [&](const DeviceBuffer<fp8>& w8, const DeviceBuffer<float>& ws,
                   const DeviceBuffer<bf16>& bias, const bf16* c, bf16* out, int n, int k) {
    GemmParams g;
    g.a8 = q8_.get();
    g.a_scale = q8_scale_.get();
    g.w8 = w8.get();
    g.w_scale = ws.get();
    g.bias = bias.get();
    g.c = c;
    g.out = out;
    g.m = T, g.n = n, g.k = k;
    return gemm_->Run(g, stream);
  };
  if (cap_.fp8_mlp_only) {
    PETAL_RETURN_IF_ERROR(LaunchAddRmsNorm(
        {nullptr, r_.get(), L.in_norm.get(), config_.norm_eps, x_.get(), T, H}, stream));
    PETAL_RETURN_IF_ERROR(
        gemm_->Run({x_.get(), L.qkv.get(), L.qkv_b.get(), nullptr, qkv_.get(), T, QKV, H}, stream));
  } else {
    PETAL_RETURN_IF_ERROR(
        LaunchAddRmsNormFp8({nullptr, r_.get(), L.in_norm.get(), config_.norm_eps, q8_.get(),
                             q8_scale_.get(), T, H, st(Fp8Input::kQkv)},
                            stream));
    PETAL_RETURN_IF_ERROR(gemm8(L.qkv8, L.qkv_s, L.qkv_b, nullptr, qkv_.get(), QKV, H));
  }
  rp.q_norm_weight = L.q_norm.get();
  rp.k_norm_weight = L.k_norm.get();
  PETAL_RETURN_IF_ERROR(LaunchQkNormRope(rp, stream));
  PETAL_RETURN_IF_ERROR(attention_.Run(ap, stream));
  if (cap_.fp8_mlp_only) {
    PETAL_RETURN_IF_ERROR(
        gemm_->Run({attn_.get(), L.o.get(), L.o_b.get(), r_.get(), r_.get(), T, H, Q}, stream));
  } else {
    PETAL_RETURN_IF_ERROR(LaunchQuantizeRowsFp8(
        {nullptr, attn_.get(), q8_.get(), q8_scale_.get(), T, Q, st(Fp8Input::kO)}, stream));
    PETAL_RETURN_IF_ERROR(gemm8(L.o8, L.o_s, L.o_b, r_.get(), r_.get(), H, Q));
  }
  PETAL_RETURN_IF_ERROR(
      LaunchAddRmsNormFp8({nullptr, r_.get(), L.post_norm.get(), config_.norm_eps, q8_.get(),
                           q8_scale_.get(), T, H, st(Fp8Input::kGateUp)},
                          stream));
  PETAL_RETURN_IF_ERROR(gemm8(L.gate_up8, L.gate_up_s, {}, nullptr, gate_up_.get(), 2 * I, H));
  PETAL_RETURN_IF_ERROR(LaunchSiluMulFp8(
      {gate_up_.get(), q8_.get(), q8_scale_.get(), T, I, st(Fp8Input::kDown)}, stream));
  return gemm8(L.down8, L.down_s, {}, r_.get(), r_.get(), H, I);
}

Status Qwen3CudaModel::FoldedLayer(const Qwen3LayerDev& L, int l, AttentionParams& ap,
                                   QkNormRopeParams& rp, int T, cudaStream_t stream) {
  const int H = config_.hidden_size, I = config_.intermediate_size;
  const int Q = config_.num_heads * config_.head_dim;
  const int QKV = (config_.num_heads + 2 * config_.num_kv_heads) * config_.head_dim;
  auto observe_norm = [&](const DeviceBuffer<bf16>& norm, int which) -> Status {
    if (calib_.size() == 0) return Status::Ok();
    PETAL_RETURN_IF_ERROR(LaunchAddRmsNorm(
        {nullptr, r_.get(), norm.get(), config_.norm_eps, x_.get(), T, H}, stream));
    return LaunchRowAmaxBf16({x_.get(), CalibSlot(l, which), T, H}, stream);
  };
  PETAL_RETURN_IF_ERROR(observe_norm(L.in_norm, 0));
  PETAL_RETURN_IF_ERROR(
      gemm_->Run({r_.get(), L.qkv.get(), nullptr, nullptr, qkv_.get(), T, QKV, H}, stream));
  rp.q_norm_weight = L.q_norm.get();
  rp.k_norm_weight = L.k_norm.get();
  PETAL_RETURN_IF_ERROR(
      LaunchRmsScaledQkv({rp, r_.get(), H, config_.norm_eps, L.qkv_b.get()}, stream));
  PETAL_RETURN_IF_ERROR(attention_.Run(ap, stream));
  if (calib_.size() > 0)
    PETAL_RETURN_IF_ERROR(LaunchRowAmaxBf16({attn_.get(), CalibSlot(l, 1), T, Q}, stream));
  PETAL_RETURN_IF_ERROR(
      gemm_->Run({attn_.get(), L.o.get(), L.o_b.get(), r_.get(), r_.get(), T, H, Q}, stream));
  PETAL_RETURN_IF_ERROR(observe_norm(L.post_norm, 2));
  PETAL_RETURN_IF_ERROR(gemm_->Run(
      {r_.get(), L.gate_up.get(), nullptr, nullptr, gate_up_.get(), T, 2 * I, H}, stream));
  PETAL_RETURN_IF_ERROR(LaunchRmsScaledSiluMul(
      {{gate_up_.get(), act_.get(), T, I}, r_.get(), H, config_.norm_eps}, stream));
  if (calib_.size() > 0)
    PETAL_RETURN_IF_ERROR(LaunchRowAmaxBf16({act_.get(), CalibSlot(l, 3), T, I}, stream));
  return gemm_->Run({act_.get(), L.down.get(), nullptr, r_.get(), r_.get(), T, H, I}, stream);
}

GemmQkvRopeParams Qwen3CudaModel::FusedQkv(const Qwen3LayerDev& L, const QkNormRopeParams& rp,
                                           int T) const {
  GemmQkvRopeParams p;
  p.x = x_.get(), p.w = L.qkv.get(), p.bias = L.qkv_b.get(), p.out = qkv_.get();
  p.m = T, p.k = config_.hidden_size;
  p.num_q_heads = config_.num_heads, p.num_kv_heads = config_.num_kv_heads;
  p.q_norm_weight = rp.q_norm_weight, p.k_norm_weight = rp.k_norm_weight, p.eps = rp.eps;
  p.positions = rp.positions, p.rope_table = rp.rope_table, p.rope_table_rows = rp.rope_table_rows;
  return p;
}

Status Qwen3CudaModel::Forward(const DeviceBatch& b, float* pooled, cudaStream_t stream) {
  const int T = b.num_tokens, H = config_.hidden_size, I = config_.intermediate_size;
  const int D = config_.head_dim, Hq = config_.num_heads, Hkv = config_.num_kv_heads;
  const int Q = Hq * D, QKV = (Hq + 2 * Hkv) * D;
  if (T == 0) {
    PETAL_CUDA_CHECK(
        cudaMemsetAsync(pooled, 0, sizeof(float) * b.num_seqs_host * config_.OutputDim(), stream));
    return Status::Ok();
  }
  PETAL_RETURN_IF_ERROR(
      LaunchSeqInfo({b.cu_seqlens, b.num_seqs_host, T, nullptr, positions_.get()}, stream));
  PETAL_RETURN_IF_ERROR(
      LaunchEmbedding({b.token_ids, embed_.get(), config_.vocab_size, r_.get(), T, H}, stream));

  AttentionParams ap;
  ap.q = qkv_.get();
  ap.k = qkv_.get() + Q;
  ap.v = qkv_.get() + Q + Hkv * D;
  ap.q_stride = ap.k_stride = ap.v_stride = QKV;
  ap.out = attn_.get();
  ap.cu_seqlens = b.cu_seqlens;
  ap.num_seqs = b.num_seqs;
  ap.max_tokens = T;
  ap.max_seqs = b.num_seqs_host;
  ap.num_heads = Hq;
  ap.num_kv_heads = Hkv;
  ap.head_dim = D;
  ap.causal = config_.mask == AttentionMask::kCausal;
  ap.max_seqlen = b.max_seq_len;
  ap.scale = 1.0f / std::sqrt(static_cast<float>(D));
  PETAL_RETURN_IF_ERROR(attention_.Plan(ap, stream));

  QkNormRopeParams rp;
  rp.qkv = qkv_.get();
  rp.rows = T;
  rp.row_stride = QKV;
  rp.num_q_heads = Hq;
  rp.num_kv_heads = Hkv;
  rp.head_dim = D;
  rp.eps = config_.norm_eps;
  rp.positions = positions_.get();
  rp.theta = config_.rope_theta;
  rp.rope_table = rope_table_.get();
  rp.rope_table_rows = rope_rows_;
  if (qk_rope_group_rows_ > 0) rp.heads_per_warp = T >= qk_rope_group_rows_ ? 4 : 1;

  const bool fp8 = fp8_enabled() && T >= cap_.fp8_min_tokens;
  // petal calibrate: each fp8 GEMM input's per-token maxima (bf16 path only).
  auto observe = [&](int layer, int which, const bf16* v, int dim) -> Status {
    if (calib_.size() == 0) return Status::Ok();
    return LaunchRowAmaxBf16({v, CalibSlot(layer, which), T, dim}, stream);
  };
  for (size_t li = 0; li < layers_.size(); ++li) {
    const Qwen3LayerDev& L = layers_[li];
    const int l = static_cast<int>(li);
    if (fp8) {
      PETAL_RETURN_IF_ERROR(Fp8Layer(L, l, ap, rp, T, stream));
      continue;
    }
    if (fold_norms_) {
      PETAL_RETURN_IF_ERROR(FoldedLayer(L, l, ap, rp, T, stream));
      continue;
    }
    PETAL_RETURN_IF_ERROR(LaunchAddRmsNorm(
        {nullptr, r_.get(), L.in_norm.get(), config_.norm_eps, x_.get(), T, H}, stream));
    PETAL_RETURN_IF_ERROR(observe(l, 0, x_.get(), H));
    rp.q_norm_weight = L.q_norm.get();
    rp.k_norm_weight = L.k_norm.get();
    if (const int qc = FusedConfigFor(fused_qkv_, T); qc >= 0) {
      GemmQkvRopeParams fp = FusedQkv(L, rp, T);
      fp.config = qc;
      PETAL_RETURN_IF_ERROR(LaunchGemmQkvRope(fp, stream));
      ap.qk_norm = {};
    } else {
      PETAL_RETURN_IF_ERROR(gemm_->Run(
          {x_.get(), L.qkv.get(), L.qkv_b.get(), nullptr, qkv_.get(), T, QKV, H}, stream));
      if (qk_norm_in_attention_) {
        ap.qk_norm = {L.q_norm.get(),   L.k_norm.get(),    config_.norm_eps,
                      positions_.get(), rope_table_.get(), rope_rows_};
      } else {
        PETAL_RETURN_IF_ERROR(LaunchQkNormRope(rp, stream));
      }
    }
    PETAL_RETURN_IF_ERROR(attention_.Run(ap, stream));
    PETAL_RETURN_IF_ERROR(observe(l, 1, attn_.get(), Q));
    PETAL_RETURN_IF_ERROR(
        gemm_->Run({attn_.get(), L.o.get(), L.o_b.get(), r_.get(), r_.get(), T, H, Q}, stream));
    PETAL_RETURN_IF_ERROR(LaunchAddRmsNorm(
        {nullptr, r_.get(), L.post_norm.get(), config_.norm_eps, x_.get(), T, H}, stream));
    PETAL_RETURN_IF_ERROR(observe(l, 2, x_.get(), H));
    if (const int mc = FusedConfigFor(fused_mlp_, T); mc >= 0) {
      PETAL_RETURN_IF_ERROR(
          LaunchGemmSwiglu({x_.get(), L.gate_up.get(), act_.get(), T, I, H, mc}, stream));
    } else {
      PETAL_RETURN_IF_ERROR(gemm_->Run(
          {x_.get(), L.gate_up.get(), nullptr, nullptr, gate_up_.get(), T, 2 * I, H}, stream));
      const SiluMulParams sp{gate_up_.get(), act_.get(), T, I};
      PETAL_RETURN_IF_ERROR(!fused_mlp_.empty() ? LaunchSiluMulInterleaved(sp, stream)
                                                : LaunchSiluMul(sp, stream));
    }
    PETAL_RETURN_IF_ERROR(observe(l, 3, act_.get(), I));
    PETAL_RETURN_IF_ERROR(
        gemm_->Run({act_.get(), L.down.get(), nullptr, r_.get(), r_.get(), T, H, I}, stream));
  }
  PETAL_RETURN_IF_ERROR(LaunchAddRmsNorm(
      {nullptr, r_.get(), final_norm_.get(), config_.norm_eps, x_.get(), T, H}, stream));
  if (b.num_spans_host > 0)  // late chunking / windows: one row per pooling span
    return LaunchPoolSpans({x_.get(), b.pool_spans, b.num_spans_host, H, 0, pooled}, stream);
  PoolParams pp;
  pp.hidden = x_.get();
  pp.cu_seqlens = b.cu_seqlens;
  pp.num_seqs = b.num_seqs_host;
  pp.dim = H;
  pp.mode = static_cast<cpu::Pooling>(config_.pooling);
  pp.normalize = config_.normalize;
  pp.out = pooled;
  if (score_rows_.size() == 0) return LaunchPool(pp, stream);
  // LM reranker: the last token's final state times the LM head's "yes" and "no" rows only
  // (a [seqs, 2] product, never the vocabulary): pooled holds [seqs, 2] logits.
  pp.normalize = false;
  pp.out = last_.get();
  PETAL_RETURN_IF_ERROR(LaunchPool(pp, stream));
  DenseRowsParams dp;
  dp.x = last_.get();
  dp.x_stride = H;
  dp.w = score_rows_.get();
  dp.y = pooled;
  dp.rows = b.num_seqs_host;
  dp.out = 2;
  dp.in = H;
  return LaunchDenseRows(dp, stream);
}

}  // namespace petal::cuda
