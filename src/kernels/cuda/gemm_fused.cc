// Dispatch for the fused GEMMs (gemm_fused.h) to their instantiations (gemm_fused_*.cu, built
// only with PETAL_HAVE_CUTLASS). Thread-safety: the device query is
// cached per device under a mutex; everything else is stateless.
#include "kernels/cuda/gemm_fused.h"

#include <cstdint>
#include <map>
#include <mutex>

#include "kernels/cuda/gemm_fused_configs.h"
#include "kernels/cuda/launch_utils.h"

namespace petal::cuda {
namespace {

struct Config {
  int tile_n;
  const char* (*launch)(const gemm_fused::Call&);
  size_t (*workspace)(const gemm_fused::Call&);
  bool (*prepare)();
};

#ifdef PETAL_HAVE_CUTLASS
constexpr Config kConfigs[] = {
    {256, gemm_fused::LaunchSwigluN256, gemm_fused::WorkspaceSwigluN256,
     gemm_fused::PrepareSwigluN256},
    {128, gemm_fused::LaunchSwigluN128, gemm_fused::WorkspaceSwigluN128,
     gemm_fused::PrepareSwigluN128}};
constexpr int kNumConfigs = 2;
constexpr Config kQkv = {128, gemm_fused::LaunchQkvRope, gemm_fused::WorkspaceQkvRope,
                         gemm_fused::PrepareQkvRope};
#else
constexpr Config kConfigs[1] = {{0, nullptr, nullptr, nullptr}};
constexpr int kNumConfigs = 0;
constexpr Config kQkv = {0, nullptr, nullptr, nullptr};
#endif

struct DeviceInfo {
  int device = 0, sm_count = 0;
  bool hopper = false;
};

DeviceInfo CurrentDevice() {
  static std::mutex mu;
  static std::map<int, DeviceInfo> cache;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return {};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(dev);
  if (it != cache.end()) return it->second;
  DeviceInfo d;
  d.device = dev;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, dev);
  d.hopper = major == 9 && minor == 0;
  cache[dev] = d;
  return d;
}

gemm_fused::Call MakeCall(const GemmSwigluParams& p, cudaStream_t stream) {
  const DeviceInfo d = CurrentDevice();
  gemm_fused::Call c;
  c.x = p.x;
  c.w = p.w;
  c.out = p.out;
  c.m = p.m;
  c.n = 2 * p.inter;
  c.k = p.k;
  c.device = d.device;
  c.sm_count = d.sm_count;
  c.stream = stream;
  return c;
}

}  // namespace

bool GemmSwigluAvailable() { return kNumConfigs > 0 && CurrentDevice().hopper; }

int GemmSwigluConfigs() { return kNumConfigs; }

std::string GemmSwigluConfigName(int config) {
  if (config < 0 || config >= kNumConfigs) return "swiglu?";
  return "swiglu128x" + std::to_string(kConfigs[config].tile_n);
}

Status PrepareGemmSwiglu() {
  if (!GemmSwigluAvailable()) return FailedPrecondition("fused SwiGLU GEMM: not available here");
  for (int i = 0; i < kNumConfigs; ++i) {
    if (!kConfigs[i].prepare())
      return Internal("fused SwiGLU GEMM " + GemmSwigluConfigName(i) + ": cudaFuncSetAttribute");
    GemmSwigluParams p;  // the persistent scheduler needs no workspace; checked, not assumed
    p.m = 128, p.inter = 8, p.k = 8, p.config = i;
    if (kConfigs[i].workspace(MakeCall(p, nullptr)) != 0)
      return Internal("fused SwiGLU GEMM " + GemmSwigluConfigName(i) + " wants a workspace");
  }
  if (!kQkv.prepare()) return Internal("fused QKV GEMM: cudaFuncSetAttribute");
  return Status::Ok();
}

Status LaunchGemmSwiglu(const GemmSwigluParams& p, cudaStream_t stream) {
  if (p.config < 0 || p.config >= kNumConfigs)
    return BadArg("GemmSwiglu", "configuration " + std::to_string(p.config) + " not compiled in");
  if (!p.x || !p.w || !p.out) return BadArg("GemmSwiglu", "null pointer");
  if (p.m < 0 || p.inter <= 0 || p.k <= 0 || p.k % 8 || (2 * p.inter) % 8)
    return BadArg("GemmSwiglu", "k and 2 * inter must be positive multiples of 8");
  if (!IsAligned(p.x, 16) || !IsAligned(p.w, 16) || !IsAligned(p.out, 16))
    return BadArg("GemmSwiglu", "pointers must be 16-byte aligned");
  if (p.m == 0) return Status::Ok();
  const gemm_fused::Call c = MakeCall(p, stream);
  if (const char* err = kConfigs[p.config].launch(c))
    return Internal(std::string("fused SwiGLU GEMM ") + GemmSwigluConfigName(p.config) + ": " +
                    err);
  return Status::Ok();
}

Status LaunchGemmQkvRope(const GemmQkvRopeParams& p, cudaStream_t stream) {
  if (kNumConfigs == 0) return FailedPrecondition("fused QKV GEMM: not built");
  if (!p.x || !p.w || !p.out) return BadArg("GemmQkvRope", "null pointer");
  if (p.m < 0 || p.k <= 0 || p.k % 8 || p.num_q_heads <= 0 || p.num_kv_heads <= 0)
    return BadArg("GemmQkvRope", "k must be a positive multiple of 8, head counts positive");
  if ((p.q_norm_weight == nullptr) != (p.k_norm_weight == nullptr))
    return BadArg("GemmQkvRope", "give both norm weights or neither");
  if (p.positions && (!p.rope_table || p.rope_table_rows <= 0))
    return BadArg("GemmQkvRope", "rotary needs the table");
  if (!IsAligned(p.x, 16) || !IsAligned(p.w, 16) || !IsAligned(p.out, 16))
    return BadArg("GemmQkvRope", "pointers must be 16-byte aligned");
  if (p.m == 0) return Status::Ok();
  const DeviceInfo d = CurrentDevice();
  gemm_fused::Call c;
  c.x = p.x, c.w = p.w, c.out = p.out;
  c.m = p.m, c.n = (p.num_q_heads + 2 * p.num_kv_heads) * 128, c.k = p.k;
  c.bias = p.bias, c.q_norm = p.q_norm_weight, c.k_norm = p.k_norm_weight, c.eps = p.eps;
  c.positions = p.positions, c.rope_table = p.rope_table, c.rope_rows = p.rope_table_rows;
  c.num_q_heads = p.num_q_heads, c.num_kv_heads = p.num_kv_heads;
  c.device = d.device, c.sm_count = d.sm_count, c.stream = stream;
  if (const char* err = kQkv.launch(c)) return Internal(std::string("fused QKV GEMM: ") + err);
  return Status::Ok();
}

}  // namespace petal::cuda
