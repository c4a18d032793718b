// Dispatch for the CUTLASS GEMM candidates (gemm_cutlass.h) to the per-tile instantiations
// (gemm_cutlass_t*.cu, built only with PETAL_HAVE_CUTLASS). Thread-safety: the device query is
// cached per device under a mutex; everything else is stateless.
#include "kernels/cuda/gemm_cutlass.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/device_info.h"
#include "kernels/cuda/gemm_cutlass_configs.h"
#include "kernels/cuda/pdl_config.h"

namespace petal::cuda {
namespace {

struct Config {
  int features, tokens;
  bool pdl;  // built with CUTLASS_ENABLE_GDC_FOR_SM90 (kernels_cuda.cmake): may take PDL launches
  bool (*supported)(const cutlass_gemm::Call&, size_t*);
  const char* (*launch)(const cutlass_gemm::Call&);
};

#ifdef PETAL_HAVE_CUTLASS
constexpr Config kConfigs[] = {
    {128, 64, false, cutlass_gemm::SupportedT64, cutlass_gemm::LaunchT64},
    {128, 128, false, cutlass_gemm::SupportedT128, cutlass_gemm::LaunchT128},
    {64, 64, true, cutlass_gemm::SupportedP64, cutlass_gemm::LaunchP64},
    {64, 128, true, cutlass_gemm::SupportedP128, cutlass_gemm::LaunchP128}};
constexpr int kNumConfigs = 4;
#else
constexpr Config kConfigs[1] = {{0, 0, false, nullptr, nullptr}};
constexpr int kNumConfigs = 0;
#endif

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

cutlass_gemm::Call MakeCall(const GemmParams& p, CutlassGemmChoice c, void* workspace,
                            size_t workspace_bytes, cudaStream_t stream) {
  const CudaDeviceInfo d = CurrentCudaDevice();
  cutlass_gemm::Call call;
  call.p = &p;
  call.splits = c.splits;
  call.device = d.device;
  call.sm_count = d.sm_count;
  call.workspace = workspace;
  call.workspace_bytes = workspace_bytes;
  call.stream = stream;
  call.pdl = PdlEnabled() && CutlassGemmChainable(c);
  return call;
}

}  // namespace

bool CutlassGemmAvailable() {
  if (kNumConfigs == 0) return false;
  // PETAL_GEMM_CUTLASS=0 keeps the candidates out of tuning (A/B runs).
  const char* env = std::getenv("PETAL_GEMM_CUTLASS");
  if (env && std::strcmp(env, "0") == 0) return false;
  return CurrentCudaDevice().hopper;
}

bool CutlassGemmPreferred() {
  static const bool yes = [] {
    const char* env = std::getenv("PETAL_GEMM_CUTLASS");
    return env && std::strcmp(env, "prefer") == 0;
  }();
  return yes && CutlassGemmAvailable();
}

bool CutlassGemmChainable(CutlassGemmChoice c) {
  return c.config >= 0 && c.config < kNumConfigs && kConfigs[c.config].pdl;
}

int CutlassGemmConfigs() { return kNumConfigs; }

std::string CutlassGemmName(CutlassGemmChoice c) {
  if (c.config < 0 || c.config >= kNumConfigs) return "cutlass?";
  return "cutlass" + std::to_string(kConfigs[c.config].features) + "x" +
         std::to_string(kConfigs[c.config].tokens) +
         (c.splits == 0 ? std::string("/sk") : "/s" + std::to_string(c.splits));
}

bool CutlassGemmSupported(const GemmParams& p, CutlassGemmChoice c, size_t workspace_bytes) {
  if (c.config < 0 || c.config >= kNumConfigs || c.splits < 0) return false;
  if (p.fp8() || p.bias || p.gelu_tanh || p.m < 1 || p.m > kCutlassGemmMaxM) return false;
  if (p.n % 8 || p.k % 8 || !Aligned16(p.a) || !Aligned16(p.w) || !Aligned16(p.out) ||
      (p.c && !Aligned16(p.c)))
    return false;
  if (c.splits > 1 && p.k / c.splits < 256) return false;  // too thin to pay for the reduction
  size_t need = 0;
  const cutlass_gemm::Call call = MakeCall(p, c, nullptr, workspace_bytes, nullptr);
  return kConfigs[c.config].supported(call, &need) && need <= workspace_bytes;
}

Status LaunchCutlassGemm(const GemmParams& p, CutlassGemmChoice c, void* workspace,
                         size_t workspace_bytes, cudaStream_t stream) {
  if (c.config < 0 || c.config >= kNumConfigs)
    return Internal("CUTLASS GEMM configuration " + std::to_string(c.config) +
                    " is not compiled in");
  const cutlass_gemm::Call call = MakeCall(p, c, workspace, workspace_bytes, stream);
  if (const char* err = kConfigs[c.config].launch(call))
    return Internal(std::string("CUTLASS GEMM ") + CutlassGemmName(c) + ": " + err);
  return Status::Ok();
}

}  // namespace petal::cuda
