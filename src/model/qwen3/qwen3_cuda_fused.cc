// Qwen3CudaModel::FuseGemms: which bf16 batches take the fused GEMMs (kernels/cuda/gemm_fused.h).
// Off by default: on the H200 they did not make the forward faster (docs/kernels.md, "Fused
// GEMMs": the CUTLASS main loop is slower than cuBLASLt's by about what the fusion saves, and the
// load-time timing below, taken outside a graph with the weights hot in L2, chose fused kernels
// at 128 tokens that made the captured forward 12% slower). Environment, for experiments:
// PETAL_FUSED_MLP / PETAL_FUSED_QKV (each), PETAL_FUSED_GEMMS (both, where the one is unset):
// unset or 0 = off; "auto" = decided at load by timing the fused kernels against the unfused pair
// (cuBLASLt GEMM + the separate kernel) with layer 0's weights at a ladder of batch sizes up to
// the capacity, per size (a batch of T tokens follows the smallest size >= T); N > 0 = fused for
// batches of >= N tokens, the tile configuration chosen by timing.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "model/qwen3/qwen3_cuda_model.h"

namespace petal::cuda {
namespace {

constexpr int kAuto = -1;
// A fused kernel must be this much faster than the unfused pair to be used at a batch size.
constexpr double kMinGain = 0.97;

int EnvMinTokens(const char* name, int fallback) {
  const char* env = std::getenv(name);
  if (env == nullptr) return fallback;
  if (std::strcmp(env, "auto") == 0) return kAuto;
  return static_cast<int>(std::clamp<long>(std::strtol(env, nullptr, 10), 0, 1 << 30));
}

// Mean milliseconds of one call of `f` over 5 runs after 2 warm-ups, on the legacy stream.
StatusOr<double> TimeMs(const std::function<Status()>& f) {
  cudaEvent_t start = nullptr, stop = nullptr;
  PETAL_CUDA_CHECK(cudaEventCreate(&start));
  PETAL_CUDA_CHECK(cudaEventCreate(&stop));
  Status st = Status::Ok();
  for (int i = 0; i < 2 && st.ok(); ++i) st = f();
  cudaEventRecord(start, nullptr);
  for (int i = 0; i < 5 && st.ok(); ++i) st = f();
  cudaEventRecord(stop, nullptr);
  cudaEventSynchronize(stop);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  PETAL_RETURN_IF_ERROR(st);
  PETAL_CUDA_CHECK(cudaGetLastError());
  return ms / 5.0;
}

// Times `unfused(m)` and `fused(m, config)` for every config at each ladder size m and keeps,
// per size, the fastest fused config if it beats the unfused pair by kMinGain (else -1).
// `forced` > 0: fused (its fastest config) at every size >= forced, unfused below, untimed.
StatusOr<std::vector<FusedRung>> Tune(int max_tokens, int configs, int forced,
                                      const std::function<Status(int)>& unfused,
                                      const std::function<Status(int, int)>& fused,
                                      std::string* table) {
  std::vector<int> ladder;
  for (int m : {128, 512, 2048, 8192, 32768})
    if (m < max_tokens) ladder.push_back(m);
  ladder.push_back(max_tokens);
  std::vector<FusedRung> rungs;
  for (int m : ladder) {
    FusedRung r{m, -1};
    if (forced > 0 && m < forced) {
      rungs.push_back(r);
      continue;
    }
    double best = 0;
    for (int k = 0; k < configs; ++k) {
      PETAL_ASSIGN_OR_RETURN(double t, TimeMs([&] { return fused(m, k); }));
      if (k == 0 || t < best) best = t, r.config = k;
    }
    double base = 0;
    if (forced == 0) {
      PETAL_ASSIGN_OR_RETURN(base, TimeMs([&] { return unfused(m); }));
      if (!(best < kMinGain * base)) r.config = -1;
    }
    rungs.push_back(r);
    *table += (table->empty() ? "" : "; ") + std::string("m<=") + std::to_string(m) + ": " +
              std::to_string(best).substr(0, 6) +
              (forced > 0 ? "" : " vs " + std::to_string(base).substr(0, 6)) + " ms";
  }
  return rungs;
}

}  // namespace

Status Qwen3CudaModel::FuseGemms() {
  const int I = config_.intermediate_size, H = config_.hidden_size, T = cap_.max_tokens;
  if (fold_norms_ || !GemmSwigluAvailable() || H % 8 != 0 || layers_.empty() || T < 1)
    return Status::Ok();
  const int both = EnvMinTokens("PETAL_FUSED_GEMMS", 0);
  const int mlp = (2 * I) % 8 == 0 ? EnvMinTokens("PETAL_FUSED_MLP", both) : 0;
  const int qkv = config_.head_dim == 128 ? EnvMinTokens("PETAL_FUSED_QKV", both) : 0;
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
    PETAL_ASSIGN_OR_RETURN(
        fused_qkv_, Tune(T, GemmQkvRopeConfigs(), std::max(qkv, 0),
                       [&](int m) -> Status {
                         PETAL_RETURN_IF_ERROR(gemm_->Run({x_.get(), L0.qkv.get(), L0.qkv_b.get(),
                                                           nullptr, qkv_.get(), m, rp.row_stride, H},
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
        std::vector<FusedRung> rungs, Tune(T, GemmSwigluConfigs(), std::max(mlp, 0),
                       [&](int m) -> Status {
                         PETAL_RETURN_IF_ERROR(gemm_->Run({x_.get(), L0.gate_up.get(), nullptr,
                                                           nullptr, gate_up_.get(), m, 2 * I, H},
                                                          nullptr));
                         return LaunchSiluMul({gate_up_.get(), act_.get(), m, I}, nullptr);
                       },
                       [&](int m, int config) {
                         return LaunchGemmSwiglu(
                             {x_.get(), scratch.get(), act_.get(), m, I, H, config}, nullptr);
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

int FusedConfigFor(const std::vector<FusedRung>& rungs, int tokens) {
  for (const FusedRung& r : rungs)
    if (tokens <= r.max_tokens) return r.config;
  return -1;
}

std::string DescribeRungs(const std::vector<FusedRung>& rungs,
                          const std::function<std::string(int)>& name) {
  std::string s;
  for (const FusedRung& r : rungs)
    s += (s.empty() ? "" : ", ") + std::string("<=") + std::to_string(r.max_tokens) + " " +
         (r.config >= 0 ? name(r.config) : std::string("unfused"));
  return s.empty() ? "unfused" : s;
}

}  // namespace petal::cuda
