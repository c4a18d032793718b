// Qwen3CudaModel::FuseGemms: which bf16 batches take the fused GEMMs (kernels/cuda/gemm_fused.h).
// Off by default. Since session 28's epilogues the fused gate/up + SwiGLU is faster than cuBLASLt's
// GEMM + SiluMul at large batches (555 against 657 us at 32,768 tokens of the 0.6b shape on an
// H100), and `auto:4096` is meant to become the default; it stays opt-in until a GPU run has
// checked the rewritten QKV epilogue and the tile order against the CPU and measured that mode end
// to end (step s28_final). Small batches should stay unfused: there the timing below, taken
// outside a graph with one layer's weights hot in L2, chose fused kernels that made the captured
// forward slower (docs/kernels.md, "Fused GEMMs"). Environment: PETAL_FUSED_MLP / PETAL_FUSED_QKV
// (each), PETAL_FUSED_GEMMS (both, where the one is unset), in fused_mode.h's modes: 0 off,
// "auto" timed against the unfused pair at every size, "auto:N" the same from N tokens, N fused
// from N tokens whatever the timing says.
#include <algorithm>
#include <string>
#include <vector>

#include "model/fused_ladder.h"
#include "model/qwen3/qwen3_cuda_model.h"

namespace petal::cuda {

namespace {
constexpr int kDefaultMode = 0;  // off; "auto:4096" (-4096) once measured (file comment)
}  // namespace

Status Qwen3CudaModel::FuseGemms() {
  const int I = config_.intermediate_size, H = config_.hidden_size, T = cap_.max_tokens;
  if (fold_norms_ || !GemmSwigluAvailable() || H % 8 != 0 || layers_.empty() || T < 1)
    return Status::Ok();
  const int both = FusedModeFromEnv("PETAL_FUSED_GEMMS", kDefaultMode);
  const int mlp = (2 * I) % 8 == 0 ? FusedModeFromEnv("PETAL_FUSED_MLP", both) : 0;
  const int qkv = config_.head_dim == 128 ? FusedModeFromEnv("PETAL_FUSED_QKV", both) : 0;
  if (mlp == 0 && qkv == 0) return Status::Ok();
  PETAL_RETURN_IF_ERROR(PrepareGemmSwiglu());
  // Finite, non-zero inputs for the timings (the buffers are overwritten by every forward).
  PETAL_CUDA_CHECK(cudaMemset(x_.get(), 0x3c, x_.bytes()));
  PETAL_CUDA_CHECK(cudaMemset(positions_.get(), 0, positions_.bytes()));
  const Qwen3LayerDev& L0 = layers_[0];
  if (qkv != 0) {
    QkNormRopeParams rp;
    rp.qkv = qkv_.get(), rp.row_stride = (config_.num_heads + 2 * config_.num_kv_heads) * 128;
    rp.num_q_heads = config_.num_heads, rp.num_kv_heads = config_.num_kv_heads;
    rp.head_dim = 128, rp.eps = config_.norm_eps, rp.positions = positions_.get();
    rp.theta = config_.rope_theta, rp.rope_table = rope_table_.get();
    rp.rope_table_rows = rope_rows_;
    rp.q_norm_weight = L0.q_norm.get(), rp.k_norm_weight = L0.k_norm.get();
    PETAL_ASSIGN_OR_RETURN(fused_qkv_, TuneFusedLadder(
                                           T, GemmQkvRopeConfigs(), qkv,
                                           [&](int m) -> Status {
                                             PETAL_RETURN_IF_ERROR(gemm_->Run(
                                                 {x_.get(), L0.qkv.get(), L0.qkv_b.get(), nullptr,
                                                  qkv_.get(), m, rp.row_stride, H},
                                                 nullptr));
                                             QkNormRopeParams r = rp;
                                             r.rows = m;
                                             return LaunchQkNormRope(r, nullptr);
                                           },
                                           [&](int m, int config) {
                                             GemmQkvRopeParams p = FusedQkv(L0, rp, m);
                                             p.config = config;
                                             return LaunchGemmQkvRope(p, nullptr);
                                           },
                                           &fused_qkv_table_));
  }
  if (mlp != 0) {
    // Layer 0's gate/up rows interleaved into a scratch copy for the timing; every layer's are
    // interleaved in place only if the fused kernel is kept.
    DeviceBuffer<bf16> scratch;
    PETAL_RETURN_IF_ERROR(scratch.Allocate(static_cast<size_t>(2 * I) * H));
    PETAL_RETURN_IF_ERROR(LaunchInterleaveGateUp({L0.gate_up.get(), scratch.get(), I, H}, nullptr));
    PETAL_ASSIGN_OR_RETURN(
        std::vector<FusedRung> rungs,
        TuneFusedLadder(
            T, GemmSwigluConfigs(), mlp,
            [&](int m) -> Status {
              PETAL_RETURN_IF_ERROR(gemm_->Run(
                  {x_.get(), L0.gate_up.get(), nullptr, nullptr, gate_up_.get(), m, 2 * I, H},
                  nullptr));
              return LaunchSiluMul({gate_up_.get(), act_.get(), m, I}, nullptr);
            },
            [&](int m, int config) {
              return LaunchGemmSwiglu({x_.get(), scratch.get(), act_.get(), m, I, H, config},
                                      nullptr);
            },
            &fused_mlp_table_));
    if (std::any_of(rungs.begin(), rungs.end(), [](const FusedRung& r) { return r.config >= 0; })) {
      for (Qwen3LayerDev& L : layers_) {
        PETAL_RETURN_IF_ERROR(
            LaunchInterleaveGateUp({L.gate_up.get(), scratch.get(), I, H}, nullptr));
        PETAL_CUDA_CHECK(cudaMemcpyAsync(L.gate_up.get(), scratch.get(), L.gate_up.bytes(),
                                         cudaMemcpyDeviceToDevice, nullptr));
      }
      fused_mlp_ = std::move(rungs);
    }
  }
  PETAL_CUDA_CHECK(cudaDeviceSynchronize());
  return Status::Ok();
}

}  // namespace petal::cuda
