// Probe (issue 32): does the persistent-kernel design of docs/kernels.md ("Where batch 1 stands
// and what is not built") hold its budget? Standalone (links only cudart + cublasLt), like
// bench/fp8_probe.cu; the device code is in bench/persistent_probe_gemm.cuh, the weight-path
// emulation / self-check and the tensor-map encoding in bench/persistent_probe_tma.cuh.
//   nvcc -O3 -std=c++17 -arch=sm_90a bench/persistent_probe.cu -lcublasLt -o persistent_probe
//   ./persistent_probe --ms 16,64,128 --weights tma2d,bulk1d --out probe.json
//   (--dry: host self-check only, no GPU)
// Options: --ms LIST, --out FILE, --iters N (timed replays, default 30), --barrier-iters N (2000),
// --layers N (28), --tiles qkv=BNxS,o=BNxS,gu=BNxS,down=BNxS (feature tile x K slices),
// --weights LIST (weight path(s) to check and time, default tma2d): tma2d = 2-D tensor-map boxes
// of [bn rows x 64 k] with 128B swizzle (cp.async.bulk.tensor, one lane issues ks / 64 boxes per
// unit); bulk1d = the first version's 1-D cp.async.bulk copies, one 256-B copy per weight row per
// 128-k chunk (256..384 copies per unit, issued by one warp). --acts cpasync|tma2d (default
// cpasync): activation stages by 16-B cp.async (M * 8 per 64-k stage) or, experimental, one 2-D
// TMA box [M rows x 64 k] (128B swizzle) per stage from a map over the input [M][lda] (variant
// names get "_atma"); inputs written by generic stores are fenced (fence.proxy.async.global) on
// both sides of the grid barrier. --wk-reduce LIST (default smem): how a CTA's wk > 1 warp k groups
// are combined: smem = summed in shared memory, one global partial per K slice (splits == 1: bf16
// out directly, no split-K reduction); global = the first version, every k group its own global
// partial; "global,smem" runs both (variant names end in _wkglobal / _wksmem). Tilings, M or modes
// the kernel cannot run (no 8-warp grid, too much shared memory) are printed as rejected and
// skipped. --dry without --tiles checks the default tiling and qkv=32x1,o=16x1,gu=48x1,down=16x1
// and qkv=64x2,o=16x2,gu=96x2,down=16x2 at M = 8..128 (or --ms), both paths, both modes.
//
// What it measures, on whatever Hopper GPU it runs on (table on stdout, everything in the JSON):
//  1. grid-barrier latency: cooperative launches of 1 and 2 CTAs (256 threads) per SM doing
//     N back-to-back barriers, ours (a monotonic arrival counter: one red.release.gpu per CTA,
//     thread 0 spins on ld.acquire.gpu, __syncthreads around) and cooperative_groups'
//     this_grid().sync(); ns per barrier = (t(N) - t(0)) / N, medians of launches.
//  2. the 112 GEMMs of the 0.6b shape (28 layers x QKV 1024->4096, O 2048->1024 reading qkv's
//     first 2048 columns, GU 1024->6144, DOWN 3072->1024 reading gu's first 3072 columns; distinct
//     random bf16 weights per layer, scale 1/sqrt(K), random input) chained with real data
//     dependencies at M tokens:
//     - baseline: cuBLASLt (heuristic's first algorithm, bf16 in/out, fp32 compute, out^T = W a^T
//       as src/kernels/cuda/gemm.cc does), the 112 GEMMs captured in one CUDA graph;
//     - persistent (per weight path, named <path>_persistent_prefetchN): ONE cooperative launch,
//       one CTA per SM, grid barrier between phases (design in persistent_probe_gemm.cuh), at
//       weight-prefetch distance 2 (issued a whole phase ahead), 1 (issued just before the
//       barrier), 0 (after the barrier: no overlap), and distance 1 with cooperative_groups'
//       grid sync instead of ours;
//     each the median of --iters runs with the L2 flushed (128 MB memset) before each run. Then a
//     separate stamped run per variant: globaltimer stamps by every CTA per phase, summarised per
//     GEMM shape (phase span, GEMM part mean/max over CTAs, split-K reduction, barrier+issue wait,
//     and the weight bandwidth: the phase's N K 2 bytes over the GEMM part and over the span).
//  Correctness first (mandatory): layer 0's four outputs and the 28-layer chain's final x of every
//  persistent variant against cuBLASLt (relative L2 error <= 1e-2 for layer 0's four outputs and
//  <= 5e-2 for the 28-layer chain, no non-finite values; outputs poisoned with NaN before the
//  kernels run); any FAIL skips the timing and exits 1. Why two bounds: each GEMM's bf16 output
//  rounds differently from cuBLASLt's (other summation order), and 112 dependent GEMMs without a
//  norm carry that on: on an H100 layer 0 differed by 6e-5 / 2.5e-4 / 7e-4 / 1.3e-3 and the chain
//  by 2.5e-2 in every variant; a wrong tile or a race differs by O(1).
//
// Split-K: fp32 partials in a global workspace; the CTAs of one feature tile meet on a per-tile
// counter and each sums a share of the tile over the partials in a fixed order (deterministic; the
// probe checks two runs give the same bits). A CTA's k groups are summed in shared memory first
// (--wk-reduce smem), so the global partials number `splits`, none when splits == 1.
//
// Decomposition (default --tiles, 128 units per phase; shared memory = weight arena with two
// regions + 4 activation stages of StageBytes(M) (3 KiB at M = 16 .. 18 KiB at M = 128; also the
// smem k-group reduction area) + 1 KiB so the arena can be rounded up to 1024 B):
// QKV 128 features x 4 K slices of 256, O 64 x 8 of 256, GU 192 x 4 of 256, DOWN 64 x 8 of 384.
// tma2d regions are dense (bn * ks * 2 B: QKV 64 KiB, O 32, GU 96, DOWN 48; arena 144 KiB,
// 222,208 B dynamic at M = 128, 160,768 at M = 16); bulk1d rows are padded by 16 B (arena 148 KiB).
// With the default tiles wk == 1 for M >= 16 (both --wk-reduce modes are the same code path there);
// at M = 8 O / GU / DOWN have wk = 2. ptxas
// (sm_90a, nvcc 13): 227 registers, no spills, 1,024 B static shared memory (the mbarriers,
// padded by the 1024-B alignment of the dynamic arena): 1 CTA of 256 threads (8 warps) per SM,
// by design. The run prints the decomposition per M and path and checks occupancy.
//
// What it does NOT show: attention, norms, rotary, SwiGLU or residuals (the elementwise work the
// design folds into the phases); CUDA-graph capture of the cooperative launch (it is launched
// directly); wgmma (mma.sync only); behaviour under other work
// on the GPU. The per-phase stamps are globaltimer reads (resolution is GPU-dependent; the JSON
// gives the smallest nonzero step seen).
#include "persistent_probe_plan.cuh"

using namespace probe;

namespace {

struct Options {
  std::vector<int> ms{16, 64, 128};
  std::string out;
  int iters = 30, barrier_iters = 2000, layers = kLayers;
  int bn[kShapes] = {128, 64, 192, 64}, splits[kShapes] = {4, 8, 4, 8};
  std::vector<int> paths{kTma2d};  // --weights tma2d,bulk1d
  int acts_tma = 0;                // --acts tma2d (default cpasync)
  std::vector<int> wkreds{1};      // --wk-reduce smem (1), global (0), or both
  bool dry = false, ms_given = false, tiles_given = false;
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

int RunOnGpu(const Options& o, const std::vector<std::vector<PlanSet>>& plans) {
  Gpu g;
  int dev = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaGetDeviceProperties(&g.prop, dev));
  g.sms = g.prop.multiProcessorCount;
  CK(cudaDeviceGetAttribute(&g.clock_khz, cudaDevAttrClockRate, dev));
  CK(cudaDeviceGetAttribute(&g.mem_clock_khz, cudaDevAttrMemoryClockRate, dev));
  CK(cudaDeviceGetAttribute(&g.l2, cudaDevAttrL2CacheSize, dev));
  std::printf("GPU %s, sm_%d%d, %d SMs, SM clock %d MHz, memory clock %d MHz, L2 %d MiB\n",
              g.prop.name, g.prop.major, g.prop.minor, g.sms, g.clock_khz / 1000,
              g.mem_clock_khz / 1000, g.l2 >> 20);
  if (g.prop.major != 9) {
    std::fprintf(stderr, "needs a Hopper GPU (sm_90a build)\n");
    return 2;
  }
  CK(cudaStreamCreateWithFlags(&g.st, cudaStreamNonBlocking));
  CKL(cublasLtCreate(&g.lt));
  const int phases = kLayers * kShapes;
  size_t wbytes = 0;
  for (int s = 0; s < kShapes; ++s) {
    const size_t n = static_cast<size_t>(kLayers) * kN[s] * kK[s];
    CK(cudaMalloc(&g.w[s], n * 2));
    FillBf16<<<1024, 256, 0, g.st>>>(g.w[s], n, 101 + s, std::sqrt(3.f / kK[s]));  // std 1/sqrt(K)
    CK(cudaGetLastError());
    wbytes += n * 2;
    CK(cudaMalloc(&g.act[s], static_cast<size_t>(kMaxM) * kN[s] * 2));
    CK(cudaMalloc(&g.ref[s], static_cast<size_t>(kMaxM) * kN[s] * 2));
    CK(cudaMalloc(&g.ref1[s], static_cast<size_t>(kMaxM) * kN[s] * 2));
  }
  CK(cudaMalloc(&g.x0, static_cast<size_t>(kMaxM) * 1024 * 2));
  FillBf16<<<64, 256, 0, g.st>>>(g.x0, static_cast<size_t>(kMaxM) * 1024, 7, std::sqrt(3.f));
  CK(cudaGetLastError());
  for (size_t i = 0; i < plans.size(); ++i)
    for (const PlanSet& ps : plans[i])
      for (const PhaseCfg& c : ps.cfg)
        g.ws_floats = std::max(g.ws_floats, static_cast<size_t>(c.parts) * o.ms[i] * c.n);
  CK(cudaMalloc(&g.ws, g.ws_floats * 4));
  CK(cudaMalloc(&g.tile_cnt, sizeof(unsigned) * phases * kMaxTiles));
  CK(cudaMalloc(&g.bar, sizeof(unsigned)));
  CK(cudaMalloc(&g.stamps, sizeof(unsigned long long) * g.sms * phases * 3));
  CK(cudaMalloc(&g.lt_ws, kLtWs));
  CK(cudaMalloc(&g.flush, kFlush));
  CK(cudaStreamSynchronize(g.st));
  std::printf("weights: %.3f GB in %d GEMMs (%d layers)\n", wbytes / 1e9, kLayers * kShapes,
              kLayers);

  std::string js = "{\n  \"gpu\": {\"name\": \"" + std::string(g.prop.name) + "\"";
  char b[1024];
  std::snprintf(b, sizeof b,
                ", \"cc\": \"%d.%d\", \"sms\": %d, \"sm_clock_khz\": %d, \"mem_clock_khz\": %d, "
                "\"l2_bytes\": %d, \"smem_optin\": %zu},\n",
                g.prop.major, g.prop.minor, g.sms, g.clock_khz, g.mem_clock_khz, g.l2,
                g.prop.sharedMemPerBlockOptin);
  js += b;

  // ---- 1. grid barrier latency ----
  int occ_bar = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ_bar, BarrierBenchKernel, kThreads, 0));
  std::printf("\n== grid barrier, %d threads per CTA, %d barriers per launch (median of 20)\n",
              kThreads, o.barrier_iters);
  js += "  \"barrier\": [";
  bool first = true;
  for (int per_sm = 1; per_sm <= 2; ++per_sm) {
    if (per_sm > occ_bar) {
      std::printf("  %d CTAs/SM: does not fit (occupancy %d)\n", per_sm, occ_bar);
      continue;
    }
    for (int use_cg = 0; use_cg < 2; ++use_cg) {
      double t[2], mn;
      for (int k = 0; k < 2; ++k) {
        int iters = k ? o.barrier_iters : 0, cgf = use_cg;
        void* args[] = {&g.bar, &iters, &cgf};
        TimeIt(
            g, 20, 2, [&] { CK(cudaMemsetAsync(g.bar, 0, 4, g.st)); },
            [&] {
              CK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(BarrierBenchKernel),
                                             dim3(g.sms * per_sm), dim3(kThreads), args, 0, g.st));
            },
            &t[k], &mn);
      }
      const double ns = (t[1] - t[0]) * 1e6 / o.barrier_iters;
      std::printf("  %-22s %d CTAs (%d/SM): %7.1f ns per barrier (launch with 0: %.1f us)\n",
                  use_cg ? "cg this_grid().sync()" : "ours (counter)", g.sms * per_sm, per_sm, ns,
                  t[0] * 1e3);
      std::snprintf(
          b, sizeof b,
          "%s\n    {\"kind\": \"%s\", \"ctas\": %d, \"per_sm\": %d, \"ns_per_barrier\": %s, "
          "\"empty_launch_us\": %s}",
          first ? "" : ",", use_cg ? "cg_grid_sync" : "counter", g.sms * per_sm, per_sm,
          Json(ns).c_str(), Json(t[0] * 1e3).c_str());
      js += b, first = false;
    }
  }
  js += "\n  ],\n";

  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, PersistentChainKernel));
  std::printf("\npersistent kernel: %d registers, %zu B local (spill), %zu B static shared\n",
              fa.numRegs, fa.localSizeBytes, fa.sharedSizeBytes);
  std::snprintf(b, sizeof b,
                "  \"kernel\": {\"registers\": %d, \"local_bytes\": %zu, \"static_smem\": %zu, "
                "\"threads\": %d, \"grid\": %d},\n  \"cases\": [",
                fa.numRegs, fa.localSizeBytes, fa.sharedSizeBytes, kThreads, g.sms);
  js += b;

  int rc = 0;
  for (size_t mi = 0; mi < o.ms.size(); ++mi) {
    const int m = o.ms[mi];
    const std::vector<PlanSet>& pss = plans[mi];
    int smem = 0;  // the largest of the paths' (the attribute is a maximum)
    for (const PlanSet& ps : pss) smem = std::max(smem, ps.smem);
    // the variants of this M: every weight path x every prefetch variant
    struct Run {
      const PlanSet* ps;
      Variant v;
      std::string name;
    };
    std::vector<Run> runs;
    for (const PlanSet& ps : pss)
      for (int vi = 0; vi < kNumVariants; ++vi)
        runs.push_back({&ps, kVariants[vi],
                        std::string(kPathNames[ps.path]) + (ps.acts_tma ? "_atma_" : "_") +
                            kVariants[vi].name + "_wk" + kWkNames[ps.wkred]});
    CK(cudaFuncSetAttribute(PersistentChainKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            smem));
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, PersistentChainKernel, kThreads, smem));
    std::printf("\n== M = %d: %d B dynamic shared memory, occupancy %d CTA/SM, grid %d\n", m, smem,
                occ, g.sms);
    if (occ < 1) {
      std::fprintf(stderr, "persistent kernel does not fit one CTA per SM\n");
      return 2;
    }
    for (int s = 0; s < kShapes; ++s)
      if (pss[0].cfg[s].units > g.sms)
        std::printf("  note: %s has %d units on %d CTAs (some CTAs take two)\n", kNames[s],
                    pss[0].cfg[s].units, g.sms);
    LtPlan plan[kShapes];
    for (int s = 0; s < kShapes; ++s) plan[s] = MakePlan(g.lt, s, m, kLtWs);

    // ---- correctness: cuBLASLt references (1 layer, then o.layers), then every variant ----
    for (int s = 0; s < kShapes; ++s)
      CK(cudaMemsetAsync(g.ref[s], 0xff, static_cast<size_t>(m) * kN[s] * 2, g.st));
    Baseline(g, plan, 1, g.ref);
    for (int s = 0; s < kShapes; ++s)
      CK(cudaMemcpyAsync(g.ref1[s], g.ref[s], static_cast<size_t>(m) * kN[s] * 2,
                         cudaMemcpyDeviceToDevice, g.st));
    for (int s = 0; s < kShapes; ++s)
      CK(cudaMemsetAsync(g.ref[s], 0xff, static_cast<size_t>(m) * kN[s] * 2, g.st));
    Baseline(g, plan, o.layers, g.ref);
    CK(cudaStreamSynchronize(g.st));
    std::snprintf(b, sizeof b,
                  "%s\n    {\"m\": %d, \"smem_bytes\": %d, \"occupancy\": %d, "
                  "\"layers\": %d,\n     \"decomposition\": {",
                  mi ? "," : "", m, smem, occ, o.layers);
    js += b;
    for (size_t wi = 0; wi < pss.size(); ++wi) {
      std::snprintf(b, sizeof b,
                    "%s\"%s\": {\"arena_bytes\": %d, \"act_bytes\": %d, \"stage_bytes\": %d, "
                    "\"smem_bytes\": %d",
                    wi ? ", " : "", pss[wi].Name().c_str(), pss[wi].arena, pss[wi].act_bytes,
                    pss[wi].stage_bytes, pss[wi].smem);
      js += b;
      for (int s = 0; s < kShapes; ++s)
        js += std::string(", \"") + kNames[s] + "\": " + CfgJson(pss[wi].cfg[s]);
      js += "}";
    }
    js += "},\n     \"correctness\": [";
    bool pass = true;
    std::vector<char> bits_a(static_cast<size_t>(m) * 1024 * 2), bits_b(bits_a.size());
    for (size_t vi = 0; vi < runs.size(); ++vi) {
      const Variant& v = runs[vi].v;
      const PlanSet& ps = *runs[vi].ps;
      Params p = MakeParams(g, ps, m, 1, v, false);
      Poison(g, m), ResetCounters(g), LaunchChain(g, p, smem);
      CK(cudaStreamSynchronize(g.st));
      Err e1[kShapes];
      for (int s = 0; s < kShapes; ++s) e1[s] = Compare(g.act[s], g.ref1[s], m, kN[s], kN[s]);
      p = MakeParams(g, ps, m, o.layers, v, false);
      Poison(g, m), ResetCounters(g), LaunchChain(g, p, smem);
      CK(cudaStreamSynchronize(g.st));
      Err ec[kShapes];
      for (int s = 0; s < kShapes; ++s) ec[s] = Compare(g.act[s], g.ref[s], m, kN[s], kN[s]);
      CK(cudaMemcpy(bits_a.data(), g.act[3], bits_a.size(), cudaMemcpyDeviceToHost));
      ResetCounters(g), LaunchChain(g, p, smem);
      CK(cudaStreamSynchronize(g.st));
      CK(cudaMemcpy(bits_b.data(), g.act[3], bits_b.size(), cudaMemcpyDeviceToHost));
      const bool det = bits_a == bits_b;
      bool ok = true;
      for (int s = 0; s < kShapes; ++s)
        ok = ok && e1[s].rel <= kLayerTol && !e1[s].nonfinite && ec[s].rel <= kChainTol &&
             !ec[s].nonfinite;
      pass = pass && ok;
      std::printf(
          "  check %-46s layer 0: qkv %.2e o %.2e gu %.2e down %.2e | %d layers: final x "
          "%.2e (qkv %.2e o %.2e gu %.2e) non-finite %zu | repeat bit-identical: %s  %s\n",
          runs[vi].name.c_str(), e1[0].rel, e1[1].rel, e1[2].rel, e1[3].rel, o.layers, ec[3].rel,
          ec[0].rel, ec[1].rel, ec[2].rel,
          ec[0].nonfinite + ec[1].nonfinite + ec[2].nonfinite + ec[3].nonfinite + e1[0].nonfinite +
              e1[1].nonfinite + e1[2].nonfinite + e1[3].nonfinite,
          det ? "yes" : "no", ok ? "PASS" : "FAIL");
      std::snprintf(b, sizeof b,
                    "%s\n       {\"variant\": \"%s\", \"layer0_rel\": [%s, %s, %s, %s], "
                    "\"chain_rel\": [%s, %s, %s, %s], \"nonfinite\": %zu, \"deterministic\": %s, "
                    "\"pass\": %s}",
                    vi ? "," : "", runs[vi].name.c_str(), Json(e1[0].rel).c_str(),
                    Json(e1[1].rel).c_str(), Json(e1[2].rel).c_str(), Json(e1[3].rel).c_str(),
                    Json(ec[0].rel).c_str(), Json(ec[1].rel).c_str(), Json(ec[2].rel).c_str(),
                    Json(ec[3].rel).c_str(),
                    e1[0].nonfinite + e1[1].nonfinite + e1[2].nonfinite + e1[3].nonfinite +
                        ec[0].nonfinite + ec[1].nonfinite + ec[2].nonfinite + ec[3].nonfinite,
                    det ? "true" : "false", ok ? "true" : "false");
      js += b;
    }
    js += "\n     ],\n";
    std::snprintf(b, sizeof b, "     \"pass\": %s", pass ? "true" : "false");
    js += b;
    if (!pass) {
      std::printf("  correctness FAIL at M = %d: timing skipped\n", m);
      rc = 1;
      js += "}";
      continue;
    }

    // ---- timing ----
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(g.st, cudaStreamCaptureModeThreadLocal));
    Baseline(g, plan, o.layers, g.ref);
    CK(cudaStreamEndCapture(g.st, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    double med, mn;
    TimeIt(
        g, o.iters, 3, [] {}, [&] { CK(cudaGraphLaunch(exec, g.st)); }, &med, &mn);
    std::printf("  %-46s median %8.1f us  min %8.1f us  (%d GEMMs, graph, L2 flushed)\n",
                "cublaslt_graph", med * 1e3, mn * 1e3, o.layers * kShapes);
    std::snprintf(b, sizeof b,
                  ",\n     \"timing_us\": {\"cublaslt_graph\": {\"median\": %s, \"min\": %s}",
                  Json(med * 1e3).c_str(), Json(mn * 1e3).c_str());
    js += b;
    std::string stamp_js = ",\n     \"phases\": {";
    for (size_t vi = 0; vi < runs.size(); ++vi) {
      const Variant& v = runs[vi].v;
      const PhaseCfg* cfg = runs[vi].ps->cfg;
      const char* vname = runs[vi].name.c_str();
      Params p = MakeParams(g, *runs[vi].ps, m, o.layers, v, false);
      TimeIt(
          g, o.iters, 2, [&] { ResetCounters(g); }, [&] { LaunchChain(g, p, smem); }, &med, &mn);
      std::printf("  %-46s median %8.1f us  min %8.1f us\n", vname, med * 1e3, mn * 1e3);
      std::snprintf(b, sizeof b, ", \"%s\": {\"median\": %s, \"min\": %s}", vname,
                    Json(med * 1e3).c_str(), Json(mn * 1e3).c_str());
      js += b;
      // stamped run: per phase, every CTA's start / GEMM done / reduction done
      p = MakeParams(g, *runs[vi].ps, m, o.layers, v, true);
      const int nph = o.layers * kShapes;
      CK(cudaMemsetAsync(g.stamps, 0, sizeof(unsigned long long) * g.sms * phases * 3, g.st));
      Flush(g, 0), ResetCounters(g), LaunchChain(g, p, smem);
      CK(cudaStreamSynchronize(g.st));
      std::vector<unsigned long long> st(static_cast<size_t>(g.sms) * nph * 3);
      CK(cudaMemcpy(st.data(), g.stamps, st.size() * 8, cudaMemcpyDeviceToHost));
      auto at = [&](int c, int ph, int k) {
        return static_cast<double>(st[(static_cast<size_t>(c) * nph + ph) * 3 + k]);
      };
      double step = 1e30;
      for (size_t i = 1; i < st.size(); ++i)
        if (st[i] > st[i - 1] && (i % 3))
          step = std::min(step, static_cast<double>(st[i] - st[i - 1]));
      double sum[kShapes][5] = {};
      int cnt[kShapes] = {};
      for (int ph = 0; ph + 1 < nph; ++ph) {
        const int s = ShapeOf(ph);
        const PhaseCfg& c = cfg[s];
        double start = 1e300, next = 1e300, gmax = 0, gsum = 0, rsum = 0, wsum = 0;
        int busy = 0;
        for (int cta = 0; cta < g.sms; ++cta) {
          start = std::min(start, at(cta, ph, 0)), next = std::min(next, at(cta, ph + 1, 0));
          wsum += at(cta, ph + 1, 0) - at(cta, ph, 2);
          if (cta < c.units) {
            const double gm = at(cta, ph, 1) - at(cta, ph, 0);
            gmax = std::max(gmax, gm), gsum += gm, rsum += at(cta, ph, 2) - at(cta, ph, 1), ++busy;
          }
        }
        sum[s][0] += next - start, sum[s][1] += gsum / busy, sum[s][2] += gmax;
        sum[s][3] += rsum / busy, sum[s][4] += wsum / g.sms, ++cnt[s];
      }
      std::printf("    phases (us, mean over layers; GEMM = unit main loops + stores, per CTA):\n");
      stamp_js += std::string(vi ? ", " : "") + "\"" + vname + "\": {";
      for (int s = 0; s < kShapes; ++s) {
        double r[5];
        for (int k = 0; k < 5; ++k) r[k] = cnt[s] ? sum[s][k] / cnt[s] / 1e3 : 0;
        // weight bandwidth: the phase's whole weight matrix (N K 2 bytes) over the GEMM part (mean
        // over CTAs; with prefetch > 0 most of the load hides before it) and over the span
        const double wb = 2.0 * cfg[s].n * cfg[s].k, bw_g = r[1] > 0 ? wb / r[1] / 1e3 : NAN,
                     bw_s = r[0] > 0 ? wb / r[0] / 1e3 : NAN;
        std::printf(
            "      %-4s span %6.2f | GEMM mean %6.2f max %6.2f | split-K reduce %5.2f | "
            "prefetch issue + barrier %5.2f | weights %5.2f MB: %6.0f GB/s over GEMM, "
            "%6.0f over span\n",
            kNames[s], r[0], r[1], r[2], r[3], r[4], wb / 1e6, bw_g, bw_s);
        std::snprintf(b, sizeof b,
                      "%s\"%s\": {\"span\": %s, \"gemm_mean\": %s, \"gemm_max\": %s, \"reduce\": "
                      "%s, \"barrier\": %s, \"weight_bytes\": %.0f, \"weight_gbps_gemm\": %s, "
                      "\"weight_gbps_span\": %s}",
                      s ? ", " : "", kNames[s], Json(r[0]).c_str(), Json(r[1]).c_str(),
                      Json(r[2]).c_str(), Json(r[3]).c_str(), Json(r[4]).c_str(), wb,
                      Json(bw_g).c_str(), Json(bw_s).c_str());
        stamp_js += b;
      }
      std::snprintf(b, sizeof b, ", \"timer_step_ns\": %s}",
                    Json(step < 1e30 ? step : NAN).c_str());
      stamp_js += b;
    }
    js += "}" + stamp_js + "}}";
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
  }
  js += "\n  ]\n}\n";
  if (!o.out.empty()) {
    FILE* f = std::fopen(o.out.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", o.out.c_str());
      return 2;
    }
    std::fputs(js.c_str(), f);
    std::fclose(f);
    std::printf("\nwrote %s\n", o.out.c_str());
  }
  std::printf("%s\n", rc ? "FAIL" : "PASS");
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--ms") {
      o.ms.clear(), o.ms_given = true;
      for (const std::string& v : SplitList(next())) o.ms.push_back(std::atoi(v.c_str()));
    } else if (a == "--out") {
      o.out = next();
    } else if (a == "--iters") {
      o.iters = std::max(1, std::atoi(next()));
    } else if (a == "--barrier-iters") {
      o.barrier_iters = std::max(1, std::atoi(next()));
    } else if (a == "--layers") {
      o.layers = std::min(kLayers, std::max(1, std::atoi(next())));
    } else if (a == "--tiles") {
      o.tiles_given = true;
      if (!ParseTiles(next(), o.bn, o.splits)) {
        std::fprintf(stderr, "bad --tiles (qkv=128x4,o=64x8,gu=192x4,down=64x8)\n");
        return 2;
      }
    } else if (a == "--weights") {
      o.paths.clear();
      for (const std::string& w : SplitList(next())) {
        if (w != "tma2d" && w != "bulk1d") {
          std::fprintf(stderr, "bad --weights (tma2d, bulk1d or tma2d,bulk1d)\n");
          return 2;
        }
        o.paths.push_back(w == "tma2d" ? kTma2d : kBulk1d);
      }
    } else if (a == "--acts") {
      const std::string v = next();
      if (v != "tma2d" && v != "cpasync") {
        std::fprintf(stderr, "bad --acts (cpasync or tma2d)\n");
        return 2;
      }
      o.acts_tma = v == "tma2d";
    } else if (a == "--wk-reduce") {
      o.wkreds.clear();
      for (const std::string& w : SplitList(next())) {
        if (w != "smem" && w != "global") {
          std::fprintf(stderr, "bad --wk-reduce (smem, global or global,smem)\n");
          return 2;
        }
        o.wkreds.push_back(w == "smem");
      }
    } else if (a == "--dry") {
      o.dry = true;
    } else {
      std::fprintf(stderr, "unknown option %s (see the header of bench/persistent_probe.cu)\n",
                   a.c_str());
      return 2;
    }
  }

  // ---- host self-check of every decomposition (no GPU needed) ----
  constexpr int kStaticSmemMargin = 1024;
  int smem_limit = 232448 - kStaticSmemMargin;  // Hopper's opt-in maximum per block
  if (!o.dry) {
    int dev = 0, optin = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    smem_limit = optin - kStaticSmemMargin;
  }
  if (o.paths.empty()) o.paths.push_back(kTma2d);
  std::string why;
  if (o.dry && !o.tiles_given) {  // the matrix: default + split-1 / split-2 tilings, all M
    std::vector<int> ms = o.ms_given ? o.ms : std::vector<int>{8, 16, 32, 64, 128};
    const bool ok = DryMatrix(std::vector<Tiling>(std::begin(kDryTilings), std::end(kDryTilings)),
                              ms, smem_limit);
    if (!ok || !FragmentCheck(&why)) {
      std::printf("host self-check: FAIL %s\n", why.c_str());
      return 1;
    }
  }
  std::vector<std::vector<PlanSet>> plans;
  std::vector<int> ms;  // the M with at least one accepted plan
  for (int m : o.ms) {
    std::vector<PlanSet> pss;
    for (int path : o.paths)
      for (int wkred : o.wkreds) {
        PlanSet ps;
        const PlanResult r = Plan(o.bn, o.splits, m, path, wkred, smem_limit, &ps, &why);
        ps.acts_tma = o.acts_tma;
        if (r == kPlanFail) {
          std::printf("self-check FAIL M=%d %s: %s\nhost self-check: FAIL\n", m, ps.Name().c_str(),
                      why.c_str());
          return 1;
        }
        if (r == kPlanRejected) {
          std::printf("M=%d %s rejected: %s\n", m, ps.Name().c_str(), why.c_str());
          continue;
        }
        PrintCfg(m, ps);
        pss.push_back(ps);
      }
    if (!pss.empty()) plans.push_back(pss), ms.push_back(m);
  }
  if (plans.empty()) {
    std::printf("no accepted decomposition for any M: host self-check: FAIL\n");
    return 1;
  }
  o.ms = ms;
  if (!FragmentCheck(&why)) {
    std::printf("host self-check: FAIL (%s)\n", why.c_str());
    return 1;
  }
  std::printf(
      "host self-check (coverage of every (token, feature, k) per output, partials written once "
      "and read after, smem k-group reduction slots, reduction shares, smem bounds, alignment, "
      "ldmatrix fragments, weight + activation copies (swizzle emulated) vs every ldmatrix read, "
      "bank "
      "groups, expect_tx bytes): PASS\n");
  if (o.dry) return 0;
  return RunOnGpu(o, plans);
}
