// Qwen3-architecture embedders on the GPU: the forward pass of qwen3.cc in bf16 with
// cuBLASLt GEMMs and Petal's kernels. Pre-norm with a bf16 residual stream r:
//   x = RmsNorm(r); qkv = x Wqkv; q,k = rope(RmsNorm_head(q,k)); r += attn(q,k,v) Wo;
//   x = RmsNorm(r); r += (silu(x Wg) * x Wu) Wd;   final: RmsNorm(r), pooled.
// The residual adds are folded into the o_proj and down_proj GEMMs (their addend, in place). On
// the bf16 path the two pre-norms are folded too (ops.h, "RMSNorm folded into the next GEMM"):
// their weights are multiplied into Wqkv and Wgate_up at load, the GEMMs read r, and each token's
// 1/rms is applied by the QK-norm/rotary kernel and the SwiGLU kernel (PETAL_FOLD_NORMS=0: off).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <thread>
#include <vector>

#include "engine/cuda/attention_runner.h"
#include "engine/cuda/cuda_model.h"
#include "engine/cuda/device_weights.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/l2_prefetch.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/score_ops.h"
#include "model/qwen3/qwen3.h"
#include "model/qwen3/qwen3_arch.h"

namespace petal::cuda {
namespace {

struct Qwen3LayerDev {
  DeviceBuffer<bf16> in_norm, qkv, qkv_b, q_norm, k_norm, o, o_b, post_norm, gate_up, down;
  // --quantize fp8: e4m3 copies of the four dense weights and their per-output-channel scales.
  DeviceBuffer<fp8> qkv8, o8, gate_up8, down8;
  DeviceBuffer<float> qkv_s, o_s, gate_up_s, down_s;
};

// The device buffer of each host field of Qwen3LayerWeights: Init uploads through it, and
// Destination routes checkpoint names through it (name -> field: Qwen3LayerSlot, qwen3.cc).
struct DeviceField {
  Qwen3LayerField host;
  DeviceBuffer<bf16> Qwen3LayerDev::*dev;
};
using LW = Qwen3LayerWeights;
using LD = Qwen3LayerDev;
const DeviceField kDeviceFields[] = {
    {&LW::input_norm, &LD::in_norm}, {&LW::qkv, &LD::qkv},
    {&LW::qkv_bias, &LD::qkv_b},     {&LW::q_norm, &LD::q_norm},
    {&LW::k_norm, &LD::k_norm},      {&LW::o_proj, &LD::o},
    {&LW::o_bias, &LD::o_b},         {&LW::post_attention_norm, &LD::post_norm},
    {&LW::gate_up, &LD::gate_up},    {&LW::down, &LD::down},
};

class Qwen3CudaModel final : public CudaModel {
 public:
  Qwen3CudaModel(ModelConfig config, Capacity cap) : config_(std::move(config)), cap_(cap) {}
  const ModelConfig& config() const override { return config_; }
  size_t DeviceBytes() const override { return bytes_; }
  std::map<std::string, double> Stats() const override { return KernelStats(*gemm_, attention_); }
  std::string Describe() const override {
    std::string s = DescribeKernels(*gemm_, attention_);
    if (fold_norms_) s += "\nbf16: RMSNorms folded into the QKV and gate/up GEMMs";
    if (cap_.fp8)
      s += "\nfp8: dense layers in e4m3 for batches of >= " + std::to_string(cap_.fp8_min_tokens) +
           " tokens" + (cap_.fp8_mlp_only ? " (MLP only)" : "") +
           (static_s_.size() > 0 ? ", static activation scales" : ", per-token activation scales") +
           (fp8_on_ ? "" : " (disabled)");
    return s;
  }
  bool fp8_enabled() const override { return cap_.fp8 && fp8_on_; }
  void set_fp8_enabled(bool on) override { fp8_on_ = on; }

  Status EnableCalibration() override {
    const size_t n = layers_.size() * kFp8Inputs * static_cast<size_t>(cap_.max_tokens);
    PETAL_RETURN_IF_ERROR(calib_.Allocate(n));
    bytes_ += calib_.bytes();
    return Status::Ok();
  }

  Status ReportCalibration(int rows, ActivationObserver* observer) override {
    if (calib_.size() == 0) return FailedPrecondition("calibration is not enabled");
    if (rows < 0 || rows > cap_.max_tokens) return InvalidArgument("calibration rows out of range");
    std::vector<float> host(static_cast<size_t>(rows));
    for (size_t l = 0; l < layers_.size(); ++l) {
      for (int w = 0; w < kFp8Inputs; ++w) {
        PETAL_CUDA_CHECK(cudaMemcpy(host.data(), CalibSlot(static_cast<int>(l), w),
                                    host.size() * sizeof(float), cudaMemcpyDeviceToHost));
        observer->ObserveRowAmax(static_cast<int>(l), static_cast<Fp8Input>(w), host.data(), rows);
      }
    }
    return Status::Ok();
  }

  Status Init(const Qwen3Weights& w) {
    auto up = [&](DeviceBuffer<bf16>* dst, const std::vector<float>& src) -> Status {
      PETAL_ASSIGN_OR_RETURN(*dst, UploadBf16(src));
      bytes_ += dst->bytes();
      return Status::Ok();
    };
    PETAL_RETURN_IF_ERROR(up(&embed_, w.embed_tokens));
    PETAL_RETURN_IF_ERROR(up(&final_norm_, w.final_norm));
    if (!w.score_rows.empty()) {  // LM reranker: the two LM-head rows and the pooled states
      PETAL_RETURN_IF_ERROR(up(&score_rows_, w.score_rows));
      PETAL_RETURN_IF_ERROR(
          last_.Allocate(static_cast<size_t>(cap_.max_seqs) * config_.hidden_size));
      bytes_ += last_.bytes();
    }
    layers_.resize(w.layers.size());
    for (size_t i = 0; i < w.layers.size(); ++i) {
      const auto& s = w.layers[i];
      auto& d = layers_[i];
      for (const DeviceField& f : kDeviceFields) PETAL_RETURN_IF_ERROR(up(&(d.*f.dev), s.*f.host));
    }
    return InitBuffers(&w);
  }

  // The bf16 weights straight from the checkpoint (no fp32 host copy), converted and uploaded on
  // several threads; then the activation buffers. Not for --quantize fp8 (that quantises from
  // the fp32 values: Init).
  Status InitFromStore(const WeightStore& store) {
    const std::string prefix = store.Find("embed_tokens.weight") == nullptr &&
                                       store.Find("model.embed_tokens.weight") != nullptr
                                   ? "model."
                                   : "";
    const bool bias =
        config_.attention_bias || store.Find(prefix + "layers.0.self_attn.q_proj.bias") != nullptr;
    layers_.resize(config_.num_layers);
    // Pass 1: each destination's size (fused tensors are concatenated in table order); pass 2:
    // each tensor's offset in it.
    struct Part {
      Qwen3TensorSpec spec;
      DeviceBuffer<bf16>* dst;
      size_t numel;
    };
    std::vector<Part> parts;
    std::map<DeviceBuffer<bf16>*, size_t> sizes;
    for (Qwen3TensorSpec& spec : Qwen3CheckpointTensors(config_, bias)) {
      DeviceBuffer<bf16>* dst = Destination(spec.name);
      if (dst == nullptr) return Internal("Qwen3 table entry '" + spec.name + "' has no buffer");
      size_t n = 1;
      for (int64_t d : spec.shape) n *= static_cast<size_t>(d);
      sizes[dst] += n;
      parts.push_back({std::move(spec), dst, n});
    }
    for (auto& [dst, n] : sizes) {
      PETAL_RETURN_IF_ERROR(dst->Allocate(n));
      bytes_ += dst->bytes();
    }
    std::map<DeviceBuffer<bf16>*, size_t> offsets;
    std::vector<UploadJob> jobs;
    for (Part& p : parts) {
      jobs.push_back({prefix + p.spec.name, p.spec.shape, p.dst->get() + offsets[p.dst]});
      offsets[p.dst] += p.numel;
    }
    const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
    PETAL_RETURN_IF_ERROR(UploadTensorsBf16(store, jobs, threads));
    PETAL_RETURN_IF_ERROR(FoldNorms());
    if (config_.score_head == ScoreHead::kLmYesNo) {
      // LM reranker: the LM head's "yes" and "no" rows only (as LoadQwen3Weights reads them).
      const int64_t h = config_.hidden_size;
      const bool tied = config_.tie_word_embeddings;
      const std::string name = tied ? prefix + "embed_tokens.weight" : "lm_head.weight";
      if (!tied && store.Find(name) == nullptr) {
        return NotFound(
            "tensor 'lm_head.weight' is missing from the checkpoint (config.json "
            "'tie_word_embeddings' is false, so the reranker's yes/no rows come from it)");
      }
      PETAL_ASSIGN_OR_RETURN(std::vector<float> rows,
                             store.ReadRowsF32(name, {config_.vocab_size, h},
                                               {config_.yes_token_id, config_.no_token_id}));
      PETAL_ASSIGN_OR_RETURN(score_rows_, UploadBf16(rows));
      PETAL_RETURN_IF_ERROR(last_.Allocate(static_cast<size_t>(cap_.max_seqs) * h));
      bytes_ += score_rows_.bytes() + last_.bytes();
    }
    return InitBuffers(nullptr);
  }

  // Multiplies each layer's input norm into Wqkv's columns and its post-attention norm into
  // Wgate_up's (bf16 path only; the fp8 path quantises the unfolded weights).
  Status FoldNorms() {
    const char* env = std::getenv("PETAL_FOLD_NORMS");
    if (env != nullptr && env[0] == '0') return Status::Ok();
    const int H = config_.hidden_size, I = config_.intermediate_size;
    const int QKV = (config_.num_heads + 2 * config_.num_kv_heads) * config_.head_dim;
    for (Qwen3LayerDev& L : layers_) {
      PETAL_RETURN_IF_ERROR(LaunchScaleColumns({L.qkv.get(), L.in_norm.get(), QKV, H}, nullptr));
      PETAL_RETURN_IF_ERROR(
          LaunchScaleColumns({L.gate_up.get(), L.post_norm.get(), 2 * I, H}, nullptr));
    }
    PETAL_CUDA_CHECK(cudaDeviceSynchronize());
    fold_norms_ = true;
    return Status::Ok();
  }

  // The device buffer a checkpoint tensor (named without the "model." prefix) lands in.
  DeviceBuffer<bf16>* Destination(const std::string& name) {
    if (name == "embed_tokens.weight") return &embed_;
    if (name == "norm.weight") return &final_norm_;
    size_t layer = 0;
    Qwen3LayerField field = nullptr;
    if (!Qwen3LayerSlot(name, &layer, &field) || layer >= layers_.size()) return nullptr;
    for (const DeviceField& f : kDeviceFields) {
      if (f.host == field) return &(layers_[layer].*f.dev);
    }
    return nullptr;
  }

  // Activation buffers, rotary table, attention and GEMM state; fp8 weights from `w` (required
  // with --quantize fp8).
  Status InitBuffers(const Qwen3Weights* w) {
    const size_t T = cap_.max_tokens, H = config_.hidden_size, I = config_.intermediate_size;
    const size_t Q = static_cast<size_t>(config_.num_heads) * config_.head_dim;
    const size_t QKV = Q + 2 * static_cast<size_t>(config_.num_kv_heads) * config_.head_dim;
    if (cap_.fp8) {
      if (w == nullptr) return Internal("fp8 needs the fp32 weights");
      PETAL_RETURN_IF_ERROR(InitFp8(*w, T, H, I, Q, QKV));
    }
    PETAL_RETURN_IF_ERROR(r_.Allocate(T * H));
    PETAL_RETURN_IF_ERROR(x_.Allocate(T * H));
    PETAL_RETURN_IF_ERROR(qkv_.Allocate(T * QKV));
    PETAL_RETURN_IF_ERROR(attn_.Allocate(T * Q));
    PETAL_RETURN_IF_ERROR(gate_up_.Allocate(T * 2 * I));
    PETAL_RETURN_IF_ERROR(act_.Allocate(T * I));
    PETAL_RETURN_IF_ERROR(positions_.Allocate(T));
    // Rotary (cos, sin) for every position a sequence may reach, computed once in fp64.
    rope_rows_ = std::min(config_.max_position_embeddings, cap_.max_tokens);
    const std::vector<float2> table = RopeTable(rope_rows_, config_.head_dim, config_.rope_theta);
    PETAL_RETURN_IF_ERROR(rope_table_.Allocate(table.size()));
    PETAL_RETURN_IF_ERROR(rope_table_.CopyFromHost(table.data(), table.size()));
    bytes_ += rope_table_.bytes();
    PETAL_RETURN_IF_ERROR(attention_.Init(cap_, config_.head_dim));
    bytes_ += TotalBytes(r_, x_, qkv_, attn_, gate_up_, act_, positions_) + attention_.bytes();
    PETAL_ASSIGN_OR_RETURN(gemm_, Gemm::Create());
    // The bf16 GEMMs' weights in the order the forward pass reads them, for the L2 prefetcher.
    std::vector<L2Prefetcher::Span> spans;
    for (const Qwen3LayerDev& L : layers_)
      for (const DeviceBuffer<bf16>* wb : {&L.qkv, &L.o, &L.gate_up, &L.down})
        spans.push_back({wb->get(), wb->bytes()});
    prefetch_.SetSpans(std::move(spans));
    PETAL_RETURN_IF_ERROR(prefetch_.Init(L2PrefetchAhead()));
    return Status::Ok();
  }

  // Quantised weights (from the fp32 checkpoint values) and the activation buffers of the fp8
  // path: one e4m3 buffer and one scale vector, reused by the four GEMM inputs of a layer in turn
  // (each is consumed before the next is produced).
  Status InitFp8(const Qwen3Weights& w, size_t T, size_t H, size_t I, size_t Q, size_t QKV) {
    for (size_t i = 0; i < w.layers.size(); ++i) {
      const auto& s = w.layers[i];
      auto& d = layers_[i];
      if (!cap_.fp8_mlp_only) {
        PETAL_RETURN_IF_ERROR(UploadFp8Rows(s.qkv, QKV, H, &d.qkv8, &d.qkv_s));
        PETAL_RETURN_IF_ERROR(UploadFp8Rows(s.o_proj, H, Q, &d.o8, &d.o_s));
      }
      PETAL_RETURN_IF_ERROR(UploadFp8Rows(s.gate_up, 2 * I, H, &d.gate_up8, &d.gate_up_s));
      PETAL_RETURN_IF_ERROR(UploadFp8Rows(s.down, H, I, &d.down8, &d.down_s));
      bytes_ +=
          TotalBytes(d.qkv8, d.o8, d.gate_up8, d.down8, d.qkv_s, d.o_s, d.gate_up_s, d.down_s);
    }
    if (!cap_.fp8_static_scales.empty()) {
      const size_t want = w.layers.size() * kFp8Inputs;
      if (cap_.fp8_static_scales.size() != want)
        return InvalidArgument(
            "fp8 static scales: " + std::to_string(cap_.fp8_static_scales.size()) + " values for " +
            std::to_string(w.layers.size()) + " layers");
      for (float v : cap_.fp8_static_scales)
        if (!(v > 0.f && std::isfinite(v)))
          return InvalidArgument("fp8 static scales must be finite and positive");
      PETAL_RETURN_IF_ERROR(static_s_.Allocate(want));
      PETAL_RETURN_IF_ERROR(static_s_.CopyFromHost(cap_.fp8_static_scales.data(), want));
      bytes_ += static_s_.bytes();
    }
    PETAL_RETURN_IF_ERROR(q8_.Allocate(T * std::max({H, I, Q})));
    PETAL_RETURN_IF_ERROR(q8_scale_.Allocate(T));
    bytes_ += TotalBytes(q8_, q8_scale_);
    return Status::Ok();
  }

  // One layer's dense work on the fp8 path (attention stays bf16): the norms and SwiGLU write
  // e4m3 rows with per-token scales (or the layer's static ones), the attention output is
  // quantised before o_proj.
  Status Fp8Layer(const Qwen3LayerDev& L, int layer, AttentionParams& ap, QkNormRopeParams& rp,
                  int T, cudaStream_t stream) {
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
      PETAL_RETURN_IF_ERROR(gemm_->Run(
          {x_.get(), L.qkv.get(), L.qkv_b.get(), nullptr, qkv_.get(), T, QKV, H}, stream));
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

  // One bf16 layer with both pre-norms folded into their GEMMs (FoldNorms): the QKV and gate/up
  // GEMMs read the residual r; RmsScaledQkv and RmsScaledSiluMul apply each token's 1/rms(r).
  // `gj`: the prefetcher's index of the layer's first GEMM. petal calibrate still observes the
  // normalised inputs, computed for it alone.
  Status FoldedLayer(const Qwen3LayerDev& L, int l, AttentionParams& ap, QkNormRopeParams& rp,
                     int T, size_t gj, cudaStream_t stream) {
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
    PETAL_RETURN_IF_ERROR(prefetch_.BeforeGemm(gj, stream));
    PETAL_RETURN_IF_ERROR(
        gemm_->Run({r_.get(), L.qkv.get(), nullptr, nullptr, qkv_.get(), T, QKV, H}, stream));
    rp.q_norm_weight = L.q_norm.get();
    rp.k_norm_weight = L.k_norm.get();
    PETAL_RETURN_IF_ERROR(
        LaunchRmsScaledQkv({rp, r_.get(), H, config_.norm_eps, L.qkv_b.get()}, stream));
    PETAL_RETURN_IF_ERROR(attention_.Run(ap, stream));
    if (calib_.size() > 0)
      PETAL_RETURN_IF_ERROR(LaunchRowAmaxBf16({attn_.get(), CalibSlot(l, 1), T, Q}, stream));
    PETAL_RETURN_IF_ERROR(prefetch_.BeforeGemm(gj + 1, stream));
    PETAL_RETURN_IF_ERROR(
        gemm_->Run({attn_.get(), L.o.get(), L.o_b.get(), r_.get(), r_.get(), T, H, Q}, stream));
    PETAL_RETURN_IF_ERROR(observe_norm(L.post_norm, 2));
    PETAL_RETURN_IF_ERROR(prefetch_.BeforeGemm(gj + 2, stream));
    PETAL_RETURN_IF_ERROR(gemm_->Run(
        {r_.get(), L.gate_up.get(), nullptr, nullptr, gate_up_.get(), T, 2 * I, H}, stream));
    PETAL_RETURN_IF_ERROR(LaunchRmsScaledSiluMul(
        {{gate_up_.get(), act_.get(), T, I}, r_.get(), H, config_.norm_eps}, stream));
    if (calib_.size() > 0)
      PETAL_RETURN_IF_ERROR(LaunchRowAmaxBf16({act_.get(), CalibSlot(l, 3), T, I}, stream));
    PETAL_RETURN_IF_ERROR(prefetch_.BeforeGemm(gj + 3, stream));
    return gemm_->Run({act_.get(), L.down.get(), nullptr, r_.get(), r_.get(), T, H, I}, stream);
  }

  Status Forward(const DeviceBatch& b, float* pooled, cudaStream_t stream) override {
    const int T = b.num_tokens, H = config_.hidden_size, I = config_.intermediate_size;
    const int D = config_.head_dim, Hq = config_.num_heads, Hkv = config_.num_kv_heads;
    const int Q = Hq * D, QKV = (Hq + 2 * Hkv) * D;
    if (T == 0) {
      PETAL_CUDA_CHECK(cudaMemsetAsync(
          pooled, 0, sizeof(float) * b.num_seqs_host * config_.OutputDim(), stream));
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

    const bool fp8 = fp8_enabled() && T >= cap_.fp8_min_tokens;
    // petal calibrate: each fp8 GEMM input's per-token maxima (bf16 path only).
    auto observe = [&](int layer, int which, const bf16* v, int dim) -> Status {
      if (calib_.size() == 0) return Status::Ok();
      return LaunchRowAmaxBf16({v, CalibSlot(layer, which), T, dim}, stream);
    };
    // Batches of few tokens: the next GEMM's weights are pulled into L2 on a side stream.
    prefetch_.Begin(!fp8 && T <= L2PrefetchMaxTokens());
    size_t gj = 0;  // index of the next GEMM in the prefetcher's spans
    for (size_t li = 0; li < layers_.size(); ++li) {
      const Qwen3LayerDev& L = layers_[li];
      const int l = static_cast<int>(li);
      if (fp8) {
        PETAL_RETURN_IF_ERROR(Fp8Layer(L, l, ap, rp, T, stream));
        continue;
      }
      if (fold_norms_) {
        PETAL_RETURN_IF_ERROR(FoldedLayer(L, l, ap, rp, T, gj, stream));
        gj += 4;
        continue;
      }
      PETAL_RETURN_IF_ERROR(LaunchAddRmsNorm(
          {nullptr, r_.get(), L.in_norm.get(), config_.norm_eps, x_.get(), T, H}, stream));
      PETAL_RETURN_IF_ERROR(observe(l, 0, x_.get(), H));
      PETAL_RETURN_IF_ERROR(prefetch_.BeforeGemm(gj++, stream));
      PETAL_RETURN_IF_ERROR(gemm_->Run(
          {x_.get(), L.qkv.get(), L.qkv_b.get(), nullptr, qkv_.get(), T, QKV, H}, stream));
      rp.q_norm_weight = L.q_norm.get();
      rp.k_norm_weight = L.k_norm.get();
      PETAL_RETURN_IF_ERROR(LaunchQkNormRope(rp, stream));
      PETAL_RETURN_IF_ERROR(attention_.Run(ap, stream));
      PETAL_RETURN_IF_ERROR(observe(l, 1, attn_.get(), Q));
      PETAL_RETURN_IF_ERROR(prefetch_.BeforeGemm(gj++, stream));
      PETAL_RETURN_IF_ERROR(
          gemm_->Run({attn_.get(), L.o.get(), L.o_b.get(), r_.get(), r_.get(), T, H, Q}, stream));
      PETAL_RETURN_IF_ERROR(LaunchAddRmsNorm(
          {nullptr, r_.get(), L.post_norm.get(), config_.norm_eps, x_.get(), T, H}, stream));
      PETAL_RETURN_IF_ERROR(observe(l, 2, x_.get(), H));
      PETAL_RETURN_IF_ERROR(prefetch_.BeforeGemm(gj++, stream));
      PETAL_RETURN_IF_ERROR(gemm_->Run(
          {x_.get(), L.gate_up.get(), nullptr, nullptr, gate_up_.get(), T, 2 * I, H}, stream));
      PETAL_RETURN_IF_ERROR(LaunchSiluMul({gate_up_.get(), act_.get(), T, I}, stream));
      PETAL_RETURN_IF_ERROR(observe(l, 3, act_.get(), I));
      PETAL_RETURN_IF_ERROR(prefetch_.BeforeGemm(gj++, stream));
      PETAL_RETURN_IF_ERROR(
          gemm_->Run({act_.get(), L.down.get(), nullptr, r_.get(), r_.get(), T, H, I}, stream));
    }
    PETAL_RETURN_IF_ERROR(prefetch_.End(stream));
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

 private:
  float* CalibSlot(int layer, int which) const {
    return calib_.get() +
           (static_cast<size_t>(layer) * kFp8Inputs + which) * static_cast<size_t>(cap_.max_tokens);
  }

  ModelConfig config_;
  Capacity cap_;
  size_t bytes_ = 0;
  DeviceBuffer<bf16> embed_, final_norm_;
  DeviceBuffer<bf16> score_rows_;  // LM reranker: [2, H], the "yes" and "no" rows
  DeviceBuffer<float> last_;       // LM reranker: pooled last-token states [max_seqs, H]
  std::vector<Qwen3LayerDev> layers_;
  DeviceBuffer<bf16> r_, x_, qkv_, attn_, gate_up_, act_;
  DeviceBuffer<int32_t> positions_;
  DeviceBuffer<float2> rope_table_;
  int rope_rows_ = 0;
  AttentionRunner attention_;
  std::unique_ptr<Gemm> gemm_;
  L2Prefetcher prefetch_;
  DeviceBuffer<fp8> q8_;          // fp8 path: the current GEMM input, [T, max(H, I, Q)]
  DeviceBuffer<float> q8_scale_;  // its per-token scales, [T]
  DeviceBuffer<float> static_s_;  // --fp8-scales: [layers * kFp8Inputs] dequantisation scales
  DeviceBuffer<float> calib_;     // petal calibrate: [layers * kFp8Inputs, max_tokens] maxima
  bool fp8_on_ = true;
  bool fold_norms_ = false;  // FoldNorms ran: the bf16 layers take FoldedLayer
};

}  // namespace

StatusOr<std::unique_ptr<CudaModel>> CreateQwen3CudaModel(const ModelConfig& config,
                                                          const WeightStore& store, Capacity cap) {
  if (!config.qk_norm) {
    return Unimplemented("the CUDA Qwen3 forward needs q/k norms (qk_norm); use the CPU engine");
  }
  auto m = std::make_unique<Qwen3CudaModel>(config, cap);
  if (cap.fp8) {
    PETAL_ASSIGN_OR_RETURN(Qwen3Weights w, LoadQwen3Weights(config, store));
    PETAL_RETURN_IF_ERROR(m->Init(w));
  } else {
    PETAL_RETURN_IF_ERROR(m->InitFromStore(store));
  }
  return std::unique_ptr<CudaModel>(std::move(m));
}

}  // namespace petal::cuda
