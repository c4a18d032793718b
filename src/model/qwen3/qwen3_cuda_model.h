// Qwen3CudaModel: a Qwen3 embedder's weights and activation buffers on the GPU
// (qwen3_cuda.cc: loading, the fp8 copies, the folded norms) and its forward pass
// (qwen3_cuda_forward.cc). Internal to src/model/qwen3: the engine reaches it through
// CreateQwen3CudaModel and the CudaModel interface.
// Thread-safety: as CudaModel (one caller, on one stream, at a time).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/attention_runner.h"
#include "engine/cuda/cuda_model.h"
#include "engine/cuda/device_weights.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_fused.h"
#include "kernels/cuda/ops.h"
#include "model/fused_ladder.h"
#include "model/qwen3/qwen3.h"
#include "model/qwen3/qwen3_arch.h"

namespace petal::cuda {

struct Qwen3LayerDev {
  DeviceBuffer<bf16> in_norm, qkv, qkv_b, q_norm, k_norm, o, o_b, post_norm, gate_up, down;
  // --quantize fp8: e4m3 copies of the four dense weights and their per-output-channel scales.
  DeviceBuffer<fp8> qkv8, o8, gate_up8, down8;
  DeviceBuffer<float> qkv_s, o_s, gate_up_s, down_s;
};

class Qwen3CudaModel final : public CudaModel {
 public:
  Qwen3CudaModel(ModelConfig config, Capacity cap) : config_(std::move(config)), cap_(cap) {}
  const ModelConfig& config() const override { return config_; }
  size_t DeviceBytes() const override { return bytes_; }
  std::map<std::string, double> Stats() const override { return KernelStats(*gemm_, attention_); }
  std::string Describe() const override;
  bool fp8_enabled() const override { return cap_.fp8 && fp8_on_; }
  void set_fp8_enabled(bool on) override { fp8_on_ = on; }

  Status EnableCalibration() override;
  Status ReportCalibration(int rows, ActivationObserver* observer) override;
  Status Forward(const DeviceBatch& b, float* pooled, cudaStream_t stream) override;

  // The fp32 checkpoint values (--quantize fp8: quantised on the device), then InitBuffers.
  Status Init(const Qwen3Weights& w);

  // The bf16 weights straight from the checkpoint (no fp32 host copy), converted and uploaded on
  // several threads; then the activation buffers. Not for --quantize fp8 (that quantises from
  // the fp32 values: Init).
  Status InitFromStore(const WeightStore& store);

 private:
  // Multiplies each layer's input norm into Wqkv's columns and its post-attention norm into
  // Wgate_up's (bf16 path only; the fp8 path quantises the unfolded weights).
  Status FoldNorms();

  // The fused GEMMs (gemm_fused.h) where built and turned on (qwen3_cuda_fused.cc: off by
  // default, measured slower): gate/up + SwiGLU (interleaves every layer's gate/up rows) and
  // QKV + q/k norm + rotary (head_dim 128). Sets the fused_* members below. After InitBuffers.
  Status FuseGemms();
  GemmQkvRopeParams FusedQkv(const Qwen3LayerDev& L, const QkNormRopeParams& rp, int T) const;

  // The device buffer a checkpoint tensor (named without the "model." prefix) lands in.
  DeviceBuffer<bf16>* Destination(const std::string& name);

  // Activation buffers, rotary table, attention and GEMM state; fp8 weights from `w` (required
  // with --quantize fp8).
  Status InitBuffers(const Qwen3Weights* w);

  // Quantised weights (from the fp32 checkpoint values) and the activation buffers of the fp8
  // path: one e4m3 buffer and one scale vector, reused by the four GEMM inputs of a layer in turn
  // (each is consumed before the next is produced).
  Status InitFp8(const Qwen3Weights& w, size_t T, size_t H, size_t I, size_t Q, size_t QKV);

  // One layer's dense work on the fp8 path (attention stays bf16): the norms and SwiGLU write
  // e4m3 rows with per-token scales (or the layer's static ones), the attention output is
  // quantised before o_proj.
  Status Fp8Layer(const Qwen3LayerDev& L, int layer, AttentionParams& ap, QkNormRopeParams& rp,
                  int T, cudaStream_t stream);

  // One bf16 layer with both pre-norms folded into their GEMMs (FoldNorms): the QKV and gate/up
  // GEMMs read the residual r; RmsScaledQkv and RmsScaledSiluMul apply each token's 1/rms(r).
  // petal calibrate still observes the normalised inputs, computed for it alone.
  Status FoldedLayer(const Qwen3LayerDev& L, int l, AttentionParams& ap, QkNormRopeParams& rp,
                     int T, cudaStream_t stream);

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
  DeviceBuffer<fp8> q8_;          // fp8 path: the current GEMM input, [T, max(H, I, Q)]
  DeviceBuffer<float> q8_scale_;  // its per-token scales, [T]
  DeviceBuffer<float> static_s_;  // --fp8-scales: [layers * kFp8Inputs] dequantisation scales
  DeviceBuffer<float> calib_;     // petal calibrate: [layers * kFp8Inputs, max_tokens] maxima
  bool fp8_on_ = true;
  bool fold_norms_ = false;  // FoldNorms ran: the bf16 layers take FoldedLayer
  // The bf16 layers hand q/k norm + rotary to the attention call (AttentionParams::qk_norm: the
  // flash kernel applies it on load) instead of launching QkNormRope. Off by default (measured
  // slower, docs/attention.md); PETAL_QK_NORM_IN_ATTENTION=1 turns it on.
  bool qk_norm_in_attention_ = false;
  int qk_rope_group_rows_ = 0;  // PETAL_QK_ROPE_GROUP_ROWS; 0: QkNormRope's own threshold
  // FuseGemms' decisions. fused_mlp_ non-empty: gate/up rows are interleaved, and the batches
  // with no fused config take the GEMM and LaunchSiluMulInterleaved.
  std::vector<FusedRung> fused_mlp_, fused_qkv_;
  std::string fused_mlp_table_, fused_qkv_table_;  // the load-time timings, for Describe()
};

}  // namespace petal::cuda
