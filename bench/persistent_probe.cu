// Probe (issue 32): does the persistent-kernel design of docs/kernels.md ("Where batch 1 stands
// and what is not built") hold its budget? Standalone (links only cudart + cublasLt), like
// bench/fp8_probe.cu. This file: main (options, host self-check) and RunOnGpu (GPU setup, barrier
// latency, the JSON file); one M's correctness / timing / stamps in
// bench/persistent_probe_case.cuh, GPU state and timing helpers in _run.cuh. The device code is in
// bench/persistent_probe_gemm.cuh (design, decomposition) and _sync / _unit / _chain.cuh, the
// weight-path emulation / self-check and the tensor-map encoding in _tma.cuh, per-M plans in
// _plan.cuh, host helpers in _host.cuh.
//   nvcc -O3 -std=c++17 -arch=sm_90a bench/persistent_probe.cu -lcublasLt -o persistent_probe
//   ./persistent_probe --ms 16,64,128 --weights tma2d,bulk1d --out probe.json
//   (--dry: host self-check only, no GPU)
// --modes LIST (default persistent): persistent = the cooperative chain below; pdl = the same
// phases as one launch each, chained by programmatic dependent launch in a CUDA graph, each CTA
// issuing its weights before it waits for the previous phase (bench/persistent_probe_pdl*.cuh).
// Options: --ms LIST, --out FILE, --iters N (timed replays, default 30), --barrier-iters N (2000),
// --layers N (28), --tiles qkv=BNxS,o=BNxS,gu=BNxS,down=BNxS (feature tile x K slices),
// --weights LIST (weight path(s) to check and time, default tma2d): tma2d = 2-D tensor-map boxes
// of [bn rows x 64 k] with 128B swizzle (cp.async.bulk.tensor, one lane issues ks / 64 boxes per
// unit); bulk1d = the first version's 1-D cp.async.bulk copies, one 256-B copy per weight row per
// 128-k chunk (256..384 copies per unit, issued by one warp). --acts cpasync|tma2d (default
// cpasync): activation stages by 16-B cp.async (M * 8 per 64-k stage) or, experimental, one 2-D
// TMA box [M rows x 64 k] (128B swizzle) per stage from a map over the input [M][lda] (variant
// names get "_atma"); inputs written by generic stores are fenced (fence.proxy.async.global) on
// both sides of the grid barrier. --stage-k LIST (default 64): k per activation stage, 64, 128,
// 192 or 256 (a stage is consumed in 64-k sub-steps, each weight chunk waited for at the sub-step
// where it starts; a unit's last stage may be shorter; --acts tma2d issues stage-k / 64 boxes per
// stage on one mbarrier); --stages LIST (default 4): activation pipeline depth, 2..8. Each value
// pair is its own plan (names get _kcN / _stN where not 64 / 4), rejected with the reason where
// the arena + stages x StageBytes(M, stage-k) (or the k-group reduction area) does not fit.
// --wk-reduce LIST (default smem): how a CTA's wk > 1 warp k groups are combined: smem = summed
// in shared memory, one global partial per K slice (splits == 1: bf16 out directly, no split-K
// reduction); global = the first version, every k group its own global partial; "global,smem"
// runs both (variant names end in _wkglobal / _wksmem). Tilings, M or modes
// the kernel cannot run (no 8-warp grid, too much shared memory) are printed as rejected and
// skipped. --dry without --tiles checks the default tiling and qkv=32x1,o=16x1,gu=48x1,down=16x1
// and qkv=64x2,o=16x2,gu=96x2,down=16x2 at M = 8..128 (or --ms), both paths, both modes, at
// stage-k 64, 128, 256 (or --stage-k) x --stages, both --acts layouts emulated for every plan.
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
// at M = 8 O / GU / DOWN have wk = 2. ptxas (sm_90a, nvcc 13): 197 registers (227 before
// --stage-k / --stages), no spills, 1,024 B static shared memory (the mbarriers, padded by the
// 1024-B alignment of the dynamic arena): 1 CTA of 256 threads (8 warps) per SM, by design. The run
// prints the decomposition per M and path and checks occupancy.
//
// What it does NOT show: attention, norms, rotary, SwiGLU or residuals (the elementwise work the
// design folds into the phases); CUDA-graph capture of the cooperative launch (it is launched
// directly); wgmma (mma.sync only); behaviour under other work
// on the GPU. The per-phase stamps are globaltimer reads (resolution is GPU-dependent; the JSON
// gives the smallest nonzero step seen).
#include "persistent_probe_case.cuh"  // includes the pdl mode

namespace {

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
    const int r = RunCase(g, o, mi, plans[mi], js);
    if (r == 2) return 2;
    if (r) rc = 1;
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
    } else if (a == "--stage-k" || a == "--stages") {
      const bool sk = a == "--stage-k";
      std::vector<int>& v = sk ? o.akcs : o.astages;
      v.clear(), o.akcs_given |= sk;
      for (const std::string& w : SplitList(next())) {
        const int x = std::atoi(w.c_str());
        if (sk ? (x < kKC || x > kMaxStageK || x % kKC) : (x < 2 || x > kMaxAStages)) {
          std::fprintf(stderr, "bad %s (stage-k: 64, 128, 192, 256; stages: 2..8; lists)\n",
                       a.c_str());
          return 2;
        }
        v.push_back(x);
      }
    } else if (a == "--modes") {
      o.mode_persistent = o.mode_pdl = false;
      for (const std::string& w : SplitList(next())) {
        if (w != "persistent" && w != "pdl") {
          std::fprintf(stderr, "bad --modes (persistent, pdl or persistent,pdl)\n");
          return 2;
        }
        (w == "pdl" ? o.mode_pdl : o.mode_persistent) = true;
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
    const std::vector<int> akcs = o.akcs_given ? o.akcs : std::vector<int>{64, 128, 256};
    const bool ok = DryMatrix(std::vector<Tiling>(std::begin(kDryTilings), std::end(kDryTilings)),
                              ms, akcs, o.astages, smem_limit);
    if (!ok || !FragmentCheck(&why)) {
      std::printf("host self-check: FAIL %s\n", why.c_str());
      return 1;
    }
  }
  std::vector<std::vector<PlanSet>> plans;
  std::vector<int> ms;  // the M with at least one accepted plan
  for (int m : o.ms) {
    std::vector<PlanSet> pss;
    for (int akc : o.akcs)
      for (int stages : o.astages)
        for (int path : o.paths)
          for (int wkred : o.wkreds) {
            PlanSet ps;
            const PlanResult r =
                Plan(o.bn, o.splits, m, path, wkred, akc, stages, smem_limit, &ps, &why);
            ps.acts_tma = o.acts_tma;
            if (r == kPlanFail) {
              std::printf("self-check FAIL M=%d %s: %s\nhost self-check: FAIL\n", m,
                          ps.Name().c_str(), why.c_str());
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
