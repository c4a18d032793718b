// BERT-family encoders on the GPU: the forward pass of bert.cc in bf16 with cuBLASLt GEMMs
// and Petal's kernels. Post-LN: h = LN(h + attn(h)); h = LN(h + ffn(h)). The residual add is
// folded into the output GEMMs (their addend). The FFN's GELU (PETAL_BERT_GELU):
//  - "tanh" (the default): the tanh form, inside the FFN-input GEMM (cuBLASLt's GELU + bias
//    epilogue), as TEI computes BERT's "gelu": one pass over [tokens, intermediate] fewer
//    (MiniLM-L6 1024 x 128 +14%, H100, session 27). It differs from the checkpoints' exact (erf)
//    GELU by at most 4.7e-4 absolute (at x = -2.7); the BERT-family GPU tests hold it to the HF
//    goldens.
//  - "erf": the exact form, as a separate kernel after the GEMM, or inside its epilogue
//    (GemmBiasGelu, kernels/cuda/gemm_fused.h; measured slower, off) for the batch sizes
//    PETAL_FUSED_GELU asks (fused_mode.h: unset = PETAL_FUSED_GEMMS, else off; "auto",
//    "auto:N", N).
// The CPU engine always computes the exact form. Cross-encoders end in their
// classification head (LaunchDenseRows on the pooled first token) instead of the pooled vector;
// multi-vector (ColBERT) models end in their Dense projection on every token (GEMMs) and a
// per-token L2 normalisation to fp32 (LaunchNormalizeRows), one row per token, and their query
// expansion tokens reach attention as key lengths (DeviceBatch::key_lengths). Sparse (SPLADE)
// models end in their masked-LM head and max pooling over token chunks (SpladeHead,
// bert_splade_cuda.h).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "engine/cuda/attention_runner.h"
#include "engine/cuda/cuda_model.h"
#include "engine/cuda/device_weights.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_fused.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/score_ops.h"
#include "model/bert/bert.h"
#include "model/bert/bert_arch.h"
#include "model/bert/bert_splade_cuda.h"
#include "model/fused_ladder.h"
#include "model/multivector.h"

namespace petal::cuda {
namespace {

struct BertLayerDev {
  DeviceBuffer<bf16> qkv_w, qkv_b, o_w, o_b, ln1_g, ln1_b, in_w, in_b, out_w, out_b, ln2_g, ln2_b;
};

class BertCudaModel final : public CudaModel {
 public:
  BertCudaModel(ModelConfig config, Capacity cap) : config_(std::move(config)), cap_(cap) {}
  const ModelConfig& config() const override { return config_; }
  size_t DeviceBytes() const override { return bytes_; }
  std::map<std::string, double> Stats() const override { return KernelStats(*gemm_, attention_); }
  std::string Describe() const override {
    std::string s = DescribeKernels(*gemm_, attention_);
    s += gelu_tanh_ ? "\nFFN GELU: tanh form in the cuBLASLt epilogue (PETAL_BERT_GELU=tanh)"
                    : "\nFFN GELU: exact (erf) form (PETAL_BERT_GELU=erf)";
    if (gelu_tanh_ && std::getenv("PETAL_FUSED_GELU") != nullptr)
      s += "; PETAL_FUSED_GELU is ignored: it fuses the exact form (PETAL_BERT_GELU=erf)";
    if (!fused_gelu_.empty())
      s += "\nbf16 FFN input + bias + GELU: " + DescribeRungs(fused_gelu_, GemmBiasGeluConfigName) +
           " (" + fused_gelu_table_ + ")";
    return s;
  }

  // Picks the FFN's GELU form (PETAL_BERT_GELU) and, for the exact form, per batch size whether
  // the FFN input GEMM takes its bias and GELU in the fused kernel (PETAL_FUSED_GELU; see the
  // file comment). Call once after Init, outside capture.
  Status FuseGelu() {
    const char* gelu = std::getenv("PETAL_BERT_GELU");
    if (gelu != nullptr && std::strcmp(gelu, "erf") != 0 && std::strcmp(gelu, "tanh") != 0)
      return InvalidArgument(std::string("PETAL_BERT_GELU must be 'erf' or 'tanh', got '") + gelu +
                             "'");
    gelu_tanh_ = gelu == nullptr || std::strcmp(gelu, "tanh") == 0;
    if (gelu_tanh_) return Status::Ok();
    const int H = config_.hidden_size, I = config_.intermediate_size, T = cap_.max_tokens;
    const int mode = FusedModeFromEnv("PETAL_FUSED_GELU", FusedModeFromEnv("PETAL_FUSED_GEMMS", 0));
    if (mode == 0 || !GemmSwigluAvailable() || H % 8 || I % 8 || layers_.empty() || T < 1)
      return Status::Ok();
    PETAL_RETURN_IF_ERROR(PrepareGemmSwiglu());
    PETAL_CUDA_CHECK(cudaMemset(x_.get(), 0x3c, x_.bytes()));  // finite, non-zero; overwritten
    const BertLayerDev& L0 = layers_[0];
    PETAL_ASSIGN_OR_RETURN(
        fused_gelu_,
        TuneFusedLadder(
            T, GemmBiasGeluConfigs(), mode, [&](int m) { return UnfusedFfnIn(L0, m, nullptr); },
            [&](int m, int config) {
              return LaunchGemmBiasGelu(
                  {x_.get(), L0.in_w.get(), L0.in_b.get(), inter_.get(), m, I, H, config}, nullptr);
            },
            &fused_gelu_table_));
    PETAL_CUDA_CHECK(cudaDeviceSynchronize());
    return Status::Ok();
  }

  // Multi-vector models: the Dense modules (bf16) and their bf16 outputs, [max_tokens, out] each.
  Status InitProjection(const TokenProjection& proj) {
    int widest = 0;
    for (const TokenProjection::Layer& l : proj.layers()) {
      ProjLayer d;
      d.in = l.in;
      d.out = l.out;
      PETAL_ASSIGN_OR_RETURN(d.w, UploadBf16(l.weight));
      if (!l.bias.empty()) {
        PETAL_ASSIGN_OR_RETURN(d.b, UploadBf16(l.bias));
      }
      bytes_ += d.w.bytes() + d.b.bytes();
      widest = std::max(widest, l.out);
      proj_.push_back(std::move(d));
    }
    const size_t n = static_cast<size_t>(cap_.max_tokens) * widest;
    PETAL_RETURN_IF_ERROR(proj_a_.Allocate(n));
    PETAL_RETURN_IF_ERROR(proj_b_.Allocate(n));
    bytes_ += TotalBytes(proj_a_, proj_b_);
    return Status::Ok();
  }

  Status Init(const BertWeights& w) {
    auto up = [&](DeviceBuffer<bf16>* dst, const std::vector<float>& src) -> Status {
      PETAL_ASSIGN_OR_RETURN(*dst, UploadBf16(src));
      bytes_ += dst->bytes();
      return Status::Ok();
    };
    PETAL_RETURN_IF_ERROR(up(&word_, w.word_embeddings));
    PETAL_RETURN_IF_ERROR(up(&pos_, w.position_embeddings));
    PETAL_RETURN_IF_ERROR(up(&type_, w.token_type_embeddings));
    PETAL_RETURN_IF_ERROR(up(&emb_g_, w.embed_norm_gamma));
    PETAL_RETURN_IF_ERROR(up(&emb_b_, w.embed_norm_beta));
    if (!w.head_out_weight.empty()) {  // cross-encoder: the classification head
      PETAL_RETURN_IF_ERROR(up(&head_dense_w_, w.head_dense_weight));
      PETAL_RETURN_IF_ERROR(up(&head_dense_b_, w.head_dense_bias));
      PETAL_RETURN_IF_ERROR(up(&head_out_w_, w.head_out_weight));
      PETAL_RETURN_IF_ERROR(up(&head_out_b_, w.head_out_bias));
      const size_t rows = static_cast<size_t>(cap_.max_seqs) * config_.hidden_size;
      PETAL_RETURN_IF_ERROR(cls_.Allocate(rows));
      PETAL_RETURN_IF_ERROR(mid_.Allocate(rows));
      bytes_ += TotalBytes(cls_, mid_);
    }
    layers_.resize(w.layers.size());
    for (size_t i = 0; i < w.layers.size(); ++i) {
      const auto& s = w.layers[i];
      auto& d = layers_[i];
      for (auto [dst, src] : {std::pair{&d.qkv_w, &s.qkv_weight},
                              {&d.qkv_b, &s.qkv_bias},
                              {&d.o_w, &s.attn_out_weight},
                              {&d.o_b, &s.attn_out_bias},
                              {&d.ln1_g, &s.attn_norm_gamma},
                              {&d.ln1_b, &s.attn_norm_beta},
                              {&d.in_w, &s.ffn_in_weight},
                              {&d.in_b, &s.ffn_in_bias},
                              {&d.out_w, &s.ffn_out_weight},
                              {&d.out_b, &s.ffn_out_bias},
                              {&d.ln2_g, &s.ffn_norm_gamma},
                              {&d.ln2_b, &s.ffn_norm_beta}}) {
        PETAL_RETURN_IF_ERROR(up(dst, *src));
      }
    }
    const size_t T = cap_.max_tokens, H = config_.hidden_size, I = config_.intermediate_size;
    PETAL_RETURN_IF_ERROR(x_.Allocate(T * H));
    PETAL_RETURN_IF_ERROR(tmp_.Allocate(T * H));
    PETAL_RETURN_IF_ERROR(qkv_.Allocate(T * 3 * H));
    PETAL_RETURN_IF_ERROR(attn_.Allocate(T * H));
    PETAL_RETURN_IF_ERROR(inter_.Allocate(T * I));
    PETAL_RETURN_IF_ERROR(positions_.Allocate(T));
    PETAL_RETURN_IF_ERROR(attention_.Init(cap_, config_.head_dim));
    bytes_ += TotalBytes(x_, tmp_, qkv_, attn_, inter_, positions_) + attention_.bytes();
    PETAL_ASSIGN_OR_RETURN(gemm_, Gemm::Create());
    if (config_.score_head == ScoreHead::kBertMlmSplade) {
      splade_ = std::make_unique<SpladeHead>();
      PETAL_RETURN_IF_ERROR(splade_->Init(w, config_, cap_));
      bytes_ += splade_->bytes();
    }
    return Status::Ok();
  }

  Status Forward(const DeviceBatch& b, float* pooled, cudaStream_t stream) override {
    const int T = b.num_tokens, H = config_.hidden_size, I = config_.intermediate_size;
    if (T == 0) return LaunchPoolOnly(b, pooled, stream);
    PETAL_RETURN_IF_ERROR(
        LaunchSeqInfo({b.cu_seqlens, b.num_seqs_host, T, nullptr, positions_.get()}, stream));
    BertEmbeddingParams ep;
    ep.ids = b.token_ids;
    ep.positions = positions_.get();
    ep.type_ids = config_.type_vocab_size > 0 ? b.token_type_ids : nullptr;
    ep.word = word_.get();
    ep.pos = pos_.get();
    ep.type = type_.get();
    ep.vocab = config_.vocab_size;
    ep.max_positions = config_.max_position_embeddings;
    ep.position_offset = config_.position_offset;  // XLM-R: pad_token_id + 1
    ep.num_types = config_.type_vocab_size;
    ep.gamma = emb_g_.get();
    ep.beta = emb_b_.get();
    ep.eps = config_.norm_eps;
    ep.out = x_.get();
    ep.rows = T;
    ep.dim = H;
    PETAL_RETURN_IF_ERROR(LaunchBertEmbedding(ep, stream));

    AttentionParams ap;
    ap.q = qkv_.get();
    ap.k = qkv_.get() + H;
    ap.v = qkv_.get() + 2 * H;
    ap.q_stride = ap.k_stride = ap.v_stride = 3 * H;
    ap.out = attn_.get();
    ap.cu_seqlens = b.cu_seqlens;
    ap.num_seqs = b.num_seqs;
    ap.max_tokens = T;
    ap.max_seqs = b.num_seqs_host;
    ap.num_heads = ap.num_kv_heads = config_.num_heads;
    ap.head_dim = config_.head_dim;
    ap.causal = false;
    ap.max_seqlen = b.max_seq_len;
    ap.scale = 1.0f / std::sqrt(static_cast<float>(config_.head_dim));
    ap.kv_lens = b.key_lengths;  // multi-vector query expansion; null otherwise
    PETAL_RETURN_IF_ERROR(attention_.Plan(ap, stream));

    for (const auto& L : layers_) {
      PETAL_RETURN_IF_ERROR(gemm_->Run(
          {x_.get(), L.qkv_w.get(), L.qkv_b.get(), nullptr, qkv_.get(), T, 3 * H, H}, stream));
      PETAL_RETURN_IF_ERROR(attention_.Run(ap, stream));
      PETAL_RETURN_IF_ERROR(gemm_->Run(
          {attn_.get(), L.o_w.get(), L.o_b.get(), x_.get(), tmp_.get(), T, H, H}, stream));
      PETAL_RETURN_IF_ERROR(LaunchAddLayerNorm(
          {tmp_.get(), nullptr, L.ln1_g.get(), L.ln1_b.get(), config_.norm_eps, x_.get(), T, H},
          stream));
      if (const int gc = FusedConfigFor(fused_gelu_, T); gc >= 0) {
        PETAL_RETURN_IF_ERROR(LaunchGemmBiasGelu(
            {x_.get(), L.in_w.get(), L.in_b.get(), inter_.get(), T, I, H, gc}, stream));
      } else {
        PETAL_RETURN_IF_ERROR(UnfusedFfnIn(L, T, stream));
      }
      PETAL_RETURN_IF_ERROR(gemm_->Run(
          {inter_.get(), L.out_w.get(), L.out_b.get(), x_.get(), tmp_.get(), T, H, I}, stream));
      PETAL_RETURN_IF_ERROR(LaunchAddLayerNorm(
          {tmp_.get(), nullptr, L.ln2_g.get(), L.ln2_b.get(), config_.norm_eps, x_.get(), T, H},
          stream));
    }
    if (!proj_.empty()) return ProjectTokens(T, pooled, stream);
    if (splade_) return splade_->Run(b, x_.get(), tmp_.get(), gemm_.get(), pooled, stream);
    return Pool(b, x_.get(), pooled, stream);
  }

 private:
  // inter = gelu(x in_w^T + in_b): cuBLASLt with its GELU + bias epilogue (tanh form), or with
  // its bias epilogue followed by the exact GELU kernel.
  Status UnfusedFfnIn(const BertLayerDev& L, int T, cudaStream_t stream) {
    const int H = config_.hidden_size, I = config_.intermediate_size;
    PETAL_RETURN_IF_ERROR(gemm_->Run(
        {x_.get(), L.in_w.get(), L.in_b.get(), nullptr, inter_.get(), T, I, H, gelu_tanh_},
        stream));
    if (gelu_tanh_) return Status::Ok();
    return LaunchGelu({inter_.get(), inter_.get(), static_cast<int64_t>(T) * I}, stream);
  }

  Status Pool(const DeviceBatch& b, const bf16* hidden, float* pooled, cudaStream_t stream) {
    if (b.num_spans_host > 0) {  // late chunking / windows: one row per pooling span
      return LaunchPoolSpans(
          {hidden, b.pool_spans, b.num_spans_host, config_.hidden_size, 0, pooled}, stream);
    }
    PoolParams pp;
    pp.hidden = hidden;
    pp.cu_seqlens = b.cu_seqlens;
    pp.num_seqs = b.num_seqs_host;
    pp.dim = config_.hidden_size;
    pp.mode = static_cast<cpu::Pooling>(config_.pooling);
    pp.normalize = config_.normalize;
    pp.out = pooled;
    if (head_out_w_.size() == 0) return LaunchPool(pp, stream);
    // Cross-encoder or classifier: first-token state -> dense + tanh -> score_outputs logits (1,
    // or num_labels) (BERT: pooler then classifier; XLM-R: classifier.dense then
    // classifier.out_proj), fp32 from the pooled state.
    pp.normalize = false;
    pp.out = cls_.get();
    PETAL_RETURN_IF_ERROR(LaunchPool(pp, stream));
    const int H = config_.hidden_size;
    DenseRowsParams dense;
    dense.x = cls_.get();
    dense.x_stride = H;
    dense.w = head_dense_w_.get();
    dense.bias = head_dense_b_.get();
    dense.tanh = true;
    dense.y = mid_.get();
    dense.rows = b.num_seqs_host;
    dense.out = H;
    dense.in = H;
    PETAL_RETURN_IF_ERROR(LaunchDenseRows(dense, stream));
    DenseRowsParams out = dense;
    out.x = mid_.get();
    out.w = head_out_w_.get();
    out.bias = head_out_b_.get();
    out.tanh = false;
    out.y = pooled;
    out.out = config_.score_outputs;
    return LaunchDenseRows(out, stream);
  }
  // Multi-vector models: every token's state through the Dense modules (bf16 GEMMs, fp32
  // accumulation), then L2-normalised per token into `out` as fp32, [T, OutputDim()].
  Status ProjectTokens(int T, float* out, cudaStream_t stream) {
    const bf16* in = x_.get();
    for (size_t i = 0; i < proj_.size(); ++i) {
      const ProjLayer& l = proj_[i];
      bf16* y = i % 2 == 0 ? proj_a_.get() : proj_b_.get();
      PETAL_RETURN_IF_ERROR(gemm_->Run(
          {in, l.w.get(), l.b.size() ? l.b.get() : nullptr, nullptr, y, T, l.out, l.in}, stream));
      in = y;
    }
    return LaunchNormalizeRows({in, out, T, proj_.back().out}, stream);
  }
  // A batch of only empty sequences: zeros, as the CPU engine gives.
  Status LaunchPoolOnly(const DeviceBatch& b, float* pooled, cudaStream_t stream) {
    PETAL_CUDA_CHECK(
        cudaMemsetAsync(pooled, 0, sizeof(float) * b.num_seqs_host * config_.OutputDim(), stream));
    return Status::Ok();
  }

  ModelConfig config_;
  Capacity cap_;
  size_t bytes_ = 0;
  DeviceBuffer<bf16> word_, pos_, type_, emb_g_, emb_b_;
  // Cross-encoders: the head's weights and its fp32 scratch, [max_seqs, H] each.
  DeviceBuffer<bf16> head_dense_w_, head_dense_b_, head_out_w_, head_out_b_;
  DeviceBuffer<float> cls_, mid_;
  struct ProjLayer {
    int in = 0, out = 0;
    DeviceBuffer<bf16> w, b;
  };
  std::vector<ProjLayer> proj_;  // multi-vector models: the Dense modules
  DeviceBuffer<bf16> proj_a_, proj_b_;
  std::vector<BertLayerDev> layers_;
  DeviceBuffer<bf16> x_, tmp_, qkv_, attn_, inter_;
  DeviceBuffer<int32_t> positions_;
  AttentionRunner attention_;
  std::unique_ptr<Gemm> gemm_;
  std::unique_ptr<SpladeHead> splade_;  // sparse models only
  bool gelu_tanh_ = false;              // FuseGelu: PETAL_BERT_GELU
  std::vector<FusedRung> fused_gelu_;   // empty: never fused
  std::string fused_gelu_table_;
};

}  // namespace

StatusOr<std::unique_ptr<CudaModel>> CreateBertCudaModel(const ModelConfig& config,
                                                         const WeightStore& store, Capacity cap) {
  PETAL_ASSIGN_OR_RETURN(BertWeights w, LoadBertWeights(config, store));
  auto m = std::make_unique<BertCudaModel>(config, cap);
  PETAL_RETURN_IF_ERROR(m->Init(w));
  if (config.task == ModelTask::kMultiVector) {
    PETAL_ASSIGN_OR_RETURN(TokenProjection proj, TokenProjection::Load(config));
    PETAL_RETURN_IF_ERROR(m->InitProjection(proj));
  }
  PETAL_RETURN_IF_ERROR(m->FuseGelu());
  return std::unique_ptr<CudaModel>(std::move(m));
}

}  // namespace petal::cuda
