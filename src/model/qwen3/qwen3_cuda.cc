// Qwen3CudaModel's loading (qwen3_cuda_model.h): the bf16 checkpoint straight to the device, the
// fp32 path with the fp8 copies, the activation buffers, and the optional norm fold; and
// CreateQwen3CudaModel. The forward pass is in qwen3_cuda_forward.cc.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <thread>
#include <vector>

#include "model/qwen3/qwen3_cuda_model.h"

namespace petal::cuda {
namespace {

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

}  // namespace

std::string Qwen3CudaModel::Describe() const {
  std::string s = DescribeKernels(*gemm_, attention_);
  if (fold_norms_) s += "\nbf16: RMSNorms folded into the QKV and gate/up GEMMs";
  if (!fused_mlp_table_.empty())
    s += "\nbf16 gate/up + SwiGLU: " + DescribeRungs(fused_mlp_, GemmSwigluConfigName) +
         " (fused vs unfused at load: " + fused_mlp_table_ + ")";
  if (!fused_qkv_table_.empty())
    s += "\nbf16 QKV + q/k norm + rotary: " + DescribeRungs(fused_qkv_, GemmQkvRopeConfigName) +
         " (fused vs unfused at load: " + fused_qkv_table_ + ")";
  if (cap_.fp8)
    s += "\nfp8: dense layers in e4m3 for batches of >= " + std::to_string(cap_.fp8_min_tokens) +
         " tokens" + (cap_.fp8_mlp_only ? " (MLP only)" : "") +
         (static_s_.size() > 0 ? ", static activation scales" : ", per-token activation scales") +
         (fp8_on_ ? "" : " (disabled)");
  return s;
}

Status Qwen3CudaModel::EnableCalibration() {
  const size_t n = layers_.size() * kFp8Inputs * static_cast<size_t>(cap_.max_tokens);
  PETAL_RETURN_IF_ERROR(calib_.Allocate(n));
  bytes_ += calib_.bytes();
  return Status::Ok();
}

Status Qwen3CudaModel::ReportCalibration(int rows, ActivationObserver* observer) {
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

Status Qwen3CudaModel::Init(const Qwen3Weights& w) {
  auto up = [&](DeviceBuffer<bf16>* dst, const std::vector<float>& src) -> Status {
    PETAL_ASSIGN_OR_RETURN(*dst, UploadBf16(src));
    bytes_ += dst->bytes();
    return Status::Ok();
  };
  PETAL_RETURN_IF_ERROR(up(&embed_, w.embed_tokens));
  PETAL_RETURN_IF_ERROR(up(&final_norm_, w.final_norm));
  if (!w.score_rows.empty()) {  // LM reranker: the two LM-head rows and the pooled states
    PETAL_RETURN_IF_ERROR(up(&score_rows_, w.score_rows));
    PETAL_RETURN_IF_ERROR(last_.Allocate(static_cast<size_t>(cap_.max_seqs) * config_.hidden_size));
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

Status Qwen3CudaModel::InitFromStore(const WeightStore& store) {
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
  if (const char* env = std::getenv("PETAL_QK_NORM_IN_ATTENTION"); env && *env) {
    qk_norm_in_attention_ = env[0] != '0';
  }
  // A/B switch: from how many rows QkNormRope runs four heads a warp (the kernel's own rule when
  // unset; see docs/kernels.md).
  if (const char* env = std::getenv("PETAL_QK_ROPE_GROUP_ROWS"); env && *env) {
    qk_rope_group_rows_ = std::max(0, std::atoi(env));
  }
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
  PETAL_RETURN_IF_ERROR(InitBuffers(nullptr));
  return FuseGemms();
}

Status Qwen3CudaModel::FoldNorms() {
  const char* env = std::getenv("PETAL_FOLD_NORMS");
  if (env == nullptr || env[0] != '1') return Status::Ok();
  const int H = config_.hidden_size, I = config_.intermediate_size, D = config_.head_dim;
  // What RmsScaledQkv / RmsScaledSiluMul take (ops.h); other shapes keep the norm kernels.
  if ((D != 64 && D != 128 && D != 256) || H % 8 != 0) return Status::Ok();
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

DeviceBuffer<bf16>* Qwen3CudaModel::Destination(const std::string& name) {
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

Status Qwen3CudaModel::InitBuffers(const Qwen3Weights* w) {
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
  return Status::Ok();
}

Status Qwen3CudaModel::InitFp8(const Qwen3Weights& w, size_t T, size_t H, size_t I, size_t Q,
                               size_t QKV) {
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const auto& s = w.layers[i];
    auto& d = layers_[i];
    if (!cap_.fp8_mlp_only) {
      PETAL_RETURN_IF_ERROR(UploadFp8Rows(s.qkv, QKV, H, &d.qkv8, &d.qkv_s));
      PETAL_RETURN_IF_ERROR(UploadFp8Rows(s.o_proj, H, Q, &d.o8, &d.o_s));
    }
    PETAL_RETURN_IF_ERROR(UploadFp8Rows(s.gate_up, 2 * I, H, &d.gate_up8, &d.gate_up_s));
    PETAL_RETURN_IF_ERROR(UploadFp8Rows(s.down, H, I, &d.down8, &d.down_s));
    bytes_ += TotalBytes(d.qkv8, d.o8, d.gate_up8, d.down8, d.qkv_s, d.o_s, d.gate_up_s, d.down_s);
  }
  if (!cap_.fp8_static_scales.empty()) {
    const size_t want = w.layers.size() * kFp8Inputs;
    if (cap_.fp8_static_scales.size() != want)
      return InvalidArgument("fp8 static scales: " + std::to_string(cap_.fp8_static_scales.size()) +
                             " values for " + std::to_string(w.layers.size()) + " layers");
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
