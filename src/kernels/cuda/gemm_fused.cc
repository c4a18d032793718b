// Dispatch for the fused GEMMs (gemm_fused.h) to their instantiations (gemm_fused_*.cu, built
// only with PETAL_HAVE_CUTLASS). Thread-safety: the device query is cached per device under a
// mutex; everything else is stateless.
#include "kernels/cuda/gemm_fused.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/device_info.h"
#include "kernels/cuda/gemm_fused_configs.h"
#include "kernels/cuda/launch_utils.h"
#include "kernels/cuda/pdl_config.h"

namespace petal::cuda {
namespace {

struct Config {
  const char* name;
  const char* (*launch)(const gemm_fused::Call&);
  size_t (*workspace)(const gemm_fused::Call&);
  bool (*prepare)();
};

#ifdef PETAL_HAVE_CUTLASS
#define SWIGLU(name)                                                                    \
  {                                                                                     \
    "swiglu/" #name, gemm_fused::LaunchSwiglu##name, gemm_fused::WorkspaceSwiglu##name, \
        gemm_fused::PrepareSwiglu##name                                                 \
  }
#define QKV(name)                                                                           \
  {                                                                                         \
    "qkv_rope/" #name, gemm_fused::LaunchQkvRope##name, gemm_fused::WorkspaceQkvRope##name, \
        gemm_fused::PrepareQkvRope##name                                                    \
  }
#define GELU(name)                                                                             \
  {                                                                                            \
    "bias_gelu/" #name, gemm_fused::LaunchBiasGelu##name, gemm_fused::WorkspaceBiasGelu##name, \
        gemm_fused::PrepareBiasGelu##name                                                      \
  }
constexpr Config kSwiglu[] = {SWIGLU(C256x1), SWIGLU(P256x1), SWIGLU(P128x1), SWIGLU(C256x2)};
constexpr Config kQkv[] = {QKV(C256x1), QKV(C256x2), QKV(P128x1)};
constexpr Config kGelu[] = {GELU(C256x1), GELU(P128x1)};
constexpr int kNumSwiglu = 4, kNumQkv = 3, kNumGelu = 2;
#undef SWIGLU
#undef QKV
#undef GELU
#else
constexpr Config kSwiglu[1] = {{"", nullptr, nullptr, nullptr}};
constexpr Config* kQkv = kSwiglu;
constexpr Config* kGelu = kSwiglu;
constexpr int kNumSwiglu = 0, kNumQkv = 0, kNumGelu = 0;
#endif

// The persistent scheduler's tile order (gemm_fused_configs.h, Call): at >= kSwizzleMinM tokens
// swizzle 4 along M, which session 28 measured 10-18% faster than CUTLASS's default at 18-32K
// tokens of the 4b shape (SwiGLU C256x2; 0.6b within 1%); below it CUTLASS's default (a swizzle
// over few token tiles starves the clustered and pingpong kernels: 4b at 512 tokens took 1.8x as
// long).
// PETAL_FUSED_SCHED="swizzle,raster" forces one order everywhere, PETAL_FUSED_PROBE=nostore
// times the SwiGLU main loop alone; both are tuning probes, read once.
constexpr int kSwizzleMinM = 8192;
struct Probe {
  int max_swizzle = 0, raster = -1;  // 0 / -1: not forced
  bool no_store = false;
};
const Probe& ProbeFromEnv() {
  static const Probe probe = [] {
    Probe p;
    if (const char* s = std::getenv("PETAL_FUSED_SCHED")) {
      int sw = 1, r = 0;
      if (std::sscanf(s, "%d,%d", &sw, &r) == 2 && (sw == 1 || sw == 2 || sw == 4 || sw == 8) &&
          r >= 0 && r <= 2)
        p.max_swizzle = sw, p.raster = r;
      else
        std::fprintf(stderr, "PETAL_FUSED_SCHED=%s ignored: want \"swizzle,raster\"\n", s);
    }
    const char* n = std::getenv("PETAL_FUSED_PROBE");
    p.no_store = n != nullptr && std::strcmp(n, "nostore") == 0;
    return p;
  }();
  return probe;
}

// Sets the tile order for a call of c.m tokens.
void SetOrder(gemm_fused::Call& c) {
  const Probe& probe = ProbeFromEnv();
  if (probe.max_swizzle > 0) {
    c.max_swizzle = probe.max_swizzle, c.raster = probe.raster;
  } else if (c.m >= kSwizzleMinM) {
    c.max_swizzle = 4, c.raster = 1;
  }
  c.probe_no_store = probe.no_store;
}

gemm_fused::Call BaseCall(cudaStream_t stream) {
  const CudaDeviceInfo d = CurrentCudaDevice();
  gemm_fused::Call c;
  c.device = d.device;
  c.sm_count = d.sm_count;
  c.stream = stream;
  c.pdl = PdlEnabled();  // every fused kernel is built with GDC (kernels_cuda.cmake)
  return c;
}

Status Run(const Config& cfg, const gemm_fused::Call& c) {
  if (const char* err = cfg.launch(c))
    return Internal(std::string("fused GEMM ") + cfg.name + ": " + err);
  return Status::Ok();
}

}  // namespace

bool GemmSwigluAvailable() { return kNumSwiglu > 0 && CurrentCudaDevice().hopper; }

int GemmSwigluConfigs() { return kNumSwiglu; }
int GemmQkvRopeConfigs() { return kNumQkv; }
int GemmBiasGeluConfigs() { return kNumGelu; }

std::string GemmSwigluConfigName(int config) {
  return config >= 0 && config < kNumSwiglu ? kSwiglu[config].name : "swiglu/?";
}
std::string GemmQkvRopeConfigName(int config) {
  return config >= 0 && config < kNumQkv ? kQkv[config].name : "qkv_rope/?";
}
std::string GemmBiasGeluConfigName(int config) {
  return config >= 0 && config < kNumGelu ? kGelu[config].name : "bias_gelu/?";
}

Status PrepareGemmSwiglu() {
  if (!GemmSwigluAvailable()) return FailedPrecondition("fused GEMMs: not available here");
  auto prepare = [](const Config& cfg) -> Status {
    if (!cfg.prepare()) return Internal(std::string(cfg.name) + ": cudaFuncSetAttribute failed");
    gemm_fused::Call c = BaseCall(nullptr);  // the persistent scheduler needs no workspace:
    c.m = 128, c.n = 128, c.k = 64;          // checked, not assumed
    if (cfg.workspace(c) != 0) return Internal(std::string(cfg.name) + " wants a workspace");
    return Status::Ok();
  };
  for (int i = 0; i < kNumSwiglu; ++i) PETAL_RETURN_IF_ERROR(prepare(kSwiglu[i]));
  for (int i = 0; i < kNumQkv; ++i) PETAL_RETURN_IF_ERROR(prepare(kQkv[i]));
  for (int i = 0; i < kNumGelu; ++i) PETAL_RETURN_IF_ERROR(prepare(kGelu[i]));
  return Status::Ok();
}

Status LaunchGemmSwiglu(const GemmSwigluParams& p, cudaStream_t stream) {
  if (p.config < 0 || p.config >= kNumSwiglu)
    return BadArg("GemmSwiglu", "configuration " + std::to_string(p.config) + " not compiled in");
  if (!p.x || !p.w || !p.out) return BadArg("GemmSwiglu", "null pointer");
  if (p.m < 0 || p.inter <= 0 || p.k <= 0 || p.k % 8 || (2 * p.inter) % 8)
    return BadArg("GemmSwiglu", "k and 2 * inter must be positive multiples of 8");
  if (!IsAligned(p.x, 16) || !IsAligned(p.w, 16) || !IsAligned(p.out, 16))
    return BadArg("GemmSwiglu", "pointers must be 16-byte aligned");
  if (p.m == 0) return Status::Ok();
  gemm_fused::Call c = BaseCall(stream);
  c.x = p.x, c.w = p.w, c.out = p.out;
  c.m = p.m, c.n = 2 * p.inter, c.k = p.k;
  SetOrder(c);
  return Run(kSwiglu[p.config], c);
}

Status LaunchGemmQkvRope(const GemmQkvRopeParams& p, cudaStream_t stream) {
  if (p.config < 0 || p.config >= kNumQkv)
    return BadArg("GemmQkvRope", "configuration " + std::to_string(p.config) + " not compiled in");
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
  gemm_fused::Call c = BaseCall(stream);
  c.x = p.x, c.w = p.w, c.out = p.out;
  c.m = p.m, c.n = (p.num_q_heads + 2 * p.num_kv_heads) * 128, c.k = p.k;
  c.bias = p.bias, c.q_norm = p.q_norm_weight, c.k_norm = p.k_norm_weight, c.eps = p.eps;
  c.positions = p.positions, c.rope_table = p.rope_table, c.rope_rows = p.rope_table_rows;
  c.num_q_heads = p.num_q_heads, c.num_kv_heads = p.num_kv_heads;
  SetOrder(c);
  return Run(kQkv[p.config], c);
}

Status LaunchGemmBiasGelu(const GemmBiasGeluParams& p, cudaStream_t stream) {
  if (p.config < 0 || p.config >= kNumGelu)
    return BadArg("GemmBiasGelu", "configuration " + std::to_string(p.config) + " not compiled in");
  if (!p.x || !p.w || !p.out) return BadArg("GemmBiasGelu", "null pointer");
  if (p.m < 0 || p.n <= 0 || p.k <= 0 || p.n % 8 || p.k % 8)
    return BadArg("GemmBiasGelu", "n and k must be positive multiples of 8");
  if (!IsAligned(p.x, 16) || !IsAligned(p.w, 16) || !IsAligned(p.out, 16))
    return BadArg("GemmBiasGelu", "pointers must be 16-byte aligned");
  if (p.m == 0) return Status::Ok();
  gemm_fused::Call c = BaseCall(stream);
  c.x = p.x, c.w = p.w, c.bias = p.bias, c.out = p.out;
  c.m = p.m, c.n = p.n, c.k = p.k;
  SetOrder(c);
  return Run(kGelu[p.config], c);
}

}  // namespace petal::cuda
