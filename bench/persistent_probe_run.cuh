// Host side of bench/persistent_probe.cu: the options, the GPU state (buffers, stream, cuBLASLt),
// the timing helpers (L2 flush + event timing, median / min), the cuBLASLt baseline chain and the
// persistent kernel's parameters, counter reset, launch and output poisoning.
#pragma once
#include "persistent_probe_plan.cuh"

using namespace probe;

namespace {

struct Options {
  std::vector<int> ms{16, 64, 128};
  std::string out;
  int iters = 30, barrier_iters = 2000, layers = kLayers;
  int bn[kShapes] = {128, 64, 192, 64}, splits[kShapes] = {4, 8, 4, 8};
  std::vector<int> paths{kTma2d};                 // --weights tma2d,bulk1d
  int acts_tma = 0;                               // --acts tma2d (default cpasync)
  std::vector<int> wkreds{1};                     // --wk-reduce smem (1), global (0), or both
  std::vector<int> akcs{kKC}, astages{kAStages};  // --stage-k LIST, --stages LIST
  bool dry = false, ms_given = false, tiles_given = false, akcs_given = false;
  bool mode_persistent = true, mode_pdl = false;  // --modes persistent,pdl
};

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  ~Timer() { cudaEventDestroy(a), cudaEventDestroy(b); }
};

// ---------------- the GPU part ----------------
struct Gpu {
  cudaDeviceProp prop;
  int sms = 0, clock_khz = 0, mem_clock_khz = 0, l2 = 0;
  cudaStream_t st;
  cublasLtHandle_t lt;
  bf16* w[kShapes];
  bf16 *x0, *act[kShapes], *ref[kShapes], *ref1[kShapes];
  float* ws = nullptr;
  unsigned *tile_cnt, *bar;
  unsigned long long* stamps;
  void* lt_ws;
  void* flush;
  size_t ws_floats = 0;
};
constexpr size_t kLtWs = 32u << 20, kFlush = 128u << 20;
constexpr double kLayerTol = 1e-2;  // layer 0, each GEMM against cuBLASLt
constexpr double kChainTol = 5e-2;  // the 28-layer chain (see the header)

void Flush(Gpu& g, int i) { CK(cudaMemsetAsync(g.flush, i & 0xff, kFlush, g.st)); }

// Median / min ms over `iters` runs of `body`, each after an L2 flush and `pre`.
template <class Pre, class Body>
void TimeIt(Gpu& g, int iters, int warm, Pre pre, Body body, double* med, double* mn) {
  Timer t;
  std::vector<double> v;
  for (int i = 0; i < warm + iters; ++i) {
    Flush(g, i);
    pre();
    CK(cudaEventRecord(t.a, g.st));
    body();
    CK(cudaEventRecord(t.b, g.st));
    CK(cudaEventSynchronize(t.b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, t.a, t.b));
    if (i >= warm) v.push_back(ms);
  }
  *med = Median(v), *mn = *std::min_element(v.begin(), v.end());
}

void Baseline(Gpu& g, const LtPlan* plan, int layers, bf16* const* out) {
  const float one = 1.f, zero = 0.f;
  for (int l = 0; l < layers; ++l)
    for (int s = 0; s < kShapes; ++s) {
      const bf16* in = s == 0 ? (l == 0 ? g.x0 : out[3]) : out[s - 1];
      const bf16* w = g.w[s] + static_cast<size_t>(l) * kN[s] * kK[s];
      CKL(cublasLtMatmul(g.lt, plan[s].desc, &one, w, plan[s].lw, in, plan[s].la, &zero, out[s],
                         plan[s].lo, out[s], plan[s].lo, &plan[s].algo, g.lt_ws, kLtWs, g.st));
    }
}

Params MakeParams(Gpu& g, const PlanSet& ps, int m, int layers, const Variant& v, bool stamps) {
  Params p{};
  const int arena = ps.arena;
  for (int s = 0; s < kShapes; ++s) p.cfg[s] = ps.cfg[s], p.w[s] = g.w[s], p.act[s] = g.act[s];
  std::string why;
  if ((ps.path == kTma2d && !EncodeWeightMaps(g.w, ps.cfg, p.tmap, &why)) ||
      (ps.acts_tma && !EncodeActMaps(g.x0, g.act, m, p.amap, &why))) {
    std::fprintf(stderr, "%s\n", why.c_str());
    std::exit(2);
  }
  p.acts_tma = ps.acts_tma;
  p.x0 = g.x0, p.ws = g.ws, p.tile_cnt = g.tile_cnt, p.bar = g.bar;
  p.stamps = stamps ? g.stamps : nullptr;
  p.m = m, p.layers = layers, p.prefetch = v.prefetch, p.use_cg = v.use_cg, p.arena_bytes = arena;
  p.astage_bytes = ps.stage_bytes;
  return p;
}
void ResetCounters(Gpu& g) {
  CK(cudaMemsetAsync(g.tile_cnt, 0, sizeof(unsigned) * kLayers * kShapes * kMaxTiles, g.st));
  CK(cudaMemsetAsync(g.bar, 0, sizeof(unsigned), g.st));
}
void LaunchChain(Gpu& g, Params& p, int smem) {
  void* args[] = {&p};
  CK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(PersistentChainKernel), dim3(g.sms),
                                 dim3(kThreads), args, smem, g.st));
}
void Poison(Gpu& g, int m) {
  for (int s = 0; s < kShapes; ++s)
    CK(cudaMemsetAsync(g.act[s], 0xff, static_cast<size_t>(m) * kN[s] * 2, g.st));
  CK(cudaMemsetAsync(g.ws, 0xff, g.ws_floats * 4, g.st));
}

}  // namespace
