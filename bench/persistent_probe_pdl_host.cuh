// Host side of --modes pdl (bench/persistent_probe_pdl.cuh): for one M and each accepted plan,
// the 112 phases as separate launches in one CUDA graph, three ways:
//   plain        no launch attribute (each kernel waits for the previous one to finish);
//   pdl          programmatic stream serialisation, no early trigger (the next kernel may launch
//                when this one exits: overlaps launch latency only);
//   pdl_trigger  the same plus griddepcontrol.launch_dependents right after the weight copies are
//                issued, so the next phase's CTAs stream their weights during this phase.
// Correctness as for the persistent kernel (layer 0, the chain, a bit-identical repeat of the
// graph), then the median over --iters graph replays with the L2 flushed, then a stamped replay:
// per shape, the mean over layers of the step (last CTA end - the previous phase's last end),
// how early the CTAs started (before that end), wait release, GEMM part and split-K reduction.
// Appends ,"pdl": {...} to the case's JSON. Returns false on a correctness FAIL.
#pragma once
#include <string>
#include <vector>

#include "persistent_probe_pdl.cuh"
#include "persistent_probe_run.cuh"

namespace {

struct PdlVariant {
  const char* name;
  int pdl, trigger;
};
const PdlVariant kPdlVariants[] = {{"plain", 0, 0}, {"pdl", 1, 0}, {"pdl_trigger", 1, 1}};

// Per-shape launch state: the Params copy (region at 0, arena = the region) and its smem.
struct PdlShapes {
  Params p[kShapes];
  int smem[kShapes];
  int units[kShapes];
  int min_blocks = 1;  // PdlPhaseKernel<1> or <2>: 2 where every neighbour pair fits a SM
};
using PdlKernelFn = void (*)(Params, int, int, unsigned long long*);
PdlKernelFn PdlKernel(int min_blocks) {
  return min_blocks == 2 ? PdlPhaseKernel<2> : PdlPhaseKernel<1>;
}

PdlShapes MakePdlShapes(Gpu& g, const PlanSet& ps, int m, int layers) {
  PdlShapes r;
  const Params base = MakeParams(g, ps, m, layers, Variant{"pdl", 0, 0}, false);
  for (int s = 0; s < kShapes; ++s) {
    Params p = base;
    for (int t = 0; t < kShapes; ++t) p.cfg[t].region_off = 0;
    p.arena_bytes = (ps.cfg[s].region_bytes + kSwzAlign - 1) / kSwzAlign * kSwzAlign;
    r.p[s] = p;
    r.smem[s] = p.arena_bytes + ps.act_bytes + kArenaSlack;
    r.units[s] = ps.cfg[s].units;
  }
  // two neighbouring phases' CTAs on one SM: their shared memory + 1 KiB reserved per CTA each
  int per_sm = 0;
  CK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0));
  r.min_blocks = 2;
  for (int s = 0; s < kShapes; ++s)
    if (r.smem[s] + r.smem[(s + 1) % kShapes] + 2 * (kArenaSlack + 1024) > per_sm) r.min_blocks = 1;
  return r;
}

void LaunchPdlChain(Gpu& g, PdlShapes& sh, int layers, const PdlVariant& v,
                    unsigned long long* stamps) {
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  for (int ph = 0; ph < layers * kShapes; ++ph) {
    const int s = ShapeOf(ph);
    cudaLaunchConfig_t lc{};
    lc.gridDim = dim3(sh.units[s]);
    lc.blockDim = dim3(kThreads);
    lc.dynamicSmemBytes = sh.smem[s];
    lc.stream = g.st;
    lc.attrs = v.pdl ? at : nullptr;
    lc.numAttrs = v.pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&lc, PdlKernel(sh.min_blocks), sh.p[s], ph, v.trigger, stamps));
  }
}

cudaGraphExec_t CapturePdl(Gpu& g, PdlShapes& sh, int layers, const PdlVariant& v,
                           unsigned long long* stamps) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(g.st, cudaStreamCaptureModeThreadLocal));
  LaunchPdlChain(g, sh, layers, v, stamps);
  CK(cudaStreamEndCapture(g.st, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  CK(cudaGraphDestroy(graph));
  return exec;
}

// Summary of one stamped replay, per shape: mean over phases 1.. of that shape.
void PdlStampSummary(const std::vector<unsigned long long>& st, const PdlShapes& sh, int nph,
                     const PhaseCfg* cfg, const char* name, std::string& js) {
  auto at = [&](int ph, int cta, int k) {
    return static_cast<double>(st[(static_cast<size_t>(ph) * kPdlMaxCtas + cta) * kPdlStamps + k]);
  };
  double sum[kShapes][6] = {};
  int cnt[kShapes] = {};
  for (int ph = 1; ph < nph; ++ph) {
    const int s = ShapeOf(ph), ps = ShapeOf(ph - 1);
    double prev_end = 0, end = 0, start = 0, wait = 0, gemm = 0, red = 0;
    for (int c = 0; c < sh.units[ps]; ++c) prev_end = std::max(prev_end, at(ph - 1, c, 3));
    const int u = sh.units[s];
    for (int c = 0; c < u; ++c) {
      end = std::max(end, at(ph, c, 3));
      start += prev_end - at(ph, c, 0), wait += at(ph, c, 1) - prev_end;
      gemm += at(ph, c, 2) - at(ph, c, 1), red += at(ph, c, 3) - at(ph, c, 2);
    }
    const double r[6] = {end - prev_end, start / u, wait / u, gemm / u, red / u, 0};
    for (int k = 0; k < 5; ++k) sum[s][k] += r[k];
    ++cnt[s];
  }
  char b[640];
  std::printf("    %s per phase (us, mean over layers; lead = how long before the previous phase's "
              "last CTA ended this phase's CTAs started):\n", name);
  js += std::string("\"") + name + "\": {";
  for (int s = 0; s < kShapes; ++s) {
    double r[5];
    for (int k = 0; k < 5; ++k) r[k] = cnt[s] ? sum[s][k] / cnt[s] / 1e3 : 0;
    const double wb = 2.0 * cfg[s].n * cfg[s].k;
    std::printf("      %-4s step %6.2f | lead %6.2f | wait release %5.2f | GEMM %6.2f | split-K "
                "reduce %5.2f | weights %5.2f MB: %6.0f GB/s over the step\n",
                kNames[s], r[0], r[1], r[2], r[3], r[4], wb / 1e6, r[0] > 0 ? wb / r[0] / 1e3 : 0);
    std::snprintf(b, sizeof b,
                  "%s\"%s\": {\"step\": %s, \"lead\": %s, \"wait_release\": %s, \"gemm\": %s, "
                  "\"reduce\": %s, \"weight_bytes\": %.0f}",
                  s ? ", " : "", kNames[s], Json(r[0]).c_str(), Json(r[1]).c_str(),
                  Json(r[2]).c_str(), Json(r[3]).c_str(), Json(r[4]).c_str(), wb);
    js += b;
  }
  js += "}";
}

bool RunPdl(Gpu& g, const Options& o, int m, const std::vector<PlanSet>& pss, std::string& js) {
  char b[1024];
  const int nph = o.layers * kShapes;
  unsigned long long* stamps = nullptr;
  const size_t nstamps = static_cast<size_t>(kLayers * kShapes) * kPdlMaxCtas * kPdlStamps;
  CK(cudaMalloc(&stamps, nstamps * 8));
  js += ",\n     \"pdl\": {";
  for (int mb = 1; mb <= 2; ++mb) {
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, PdlKernel(mb)));
    std::printf("  pdl kernel <%d CTA/SM>: %d registers, %zu B local (spill), %zu B static "
                "shared\n", mb, fa.numRegs, fa.localSizeBytes, fa.sharedSizeBytes);
    std::snprintf(b, sizeof b, "\"kernel_%d\": {\"registers\": %d, \"local_bytes\": %zu}, ", mb,
                  fa.numRegs, fa.localSizeBytes);
    js += b;
  }
  js += "\"variants\": {";
  bool pass = true, first = true;
  std::vector<char> bits_a(static_cast<size_t>(m) * 1024 * 2), bits_b(bits_a.size());
  for (const PlanSet& ps : pss) {
    if (ps.acts_tma) {
      std::printf("  pdl: %s skipped (--acts tma2d is not supported across kernels)\n",
                  ps.Name().c_str());
      continue;
    }
    PdlShapes sh = MakePdlShapes(g, ps, m, o.layers);
    int smax = 0;
    for (int s = 0; s < kShapes; ++s) smax = std::max(smax, sh.smem[s]);
    CK(cudaFuncSetAttribute(PdlKernel(sh.min_blocks), cudaFuncAttributeMaxDynamicSharedMemorySize,
                            smax));
    std::string occs;
    bool fits = true;
    for (int s = 0; s < kShapes; ++s) {
      int occ = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, PdlKernel(sh.min_blocks), kThreads,
                                                       sh.smem[s]));
      occs += std::string(s ? ", " : "") + kNames[s] + " " + std::to_string(sh.smem[s]) + " B " +
              std::to_string(sh.units[s]) + " CTAs occ " + std::to_string(occ);
      // one wave (the split-K counters wait inside it) and a stamp row per CTA
      fits = fits && occ >= 1 && sh.units[s] <= occ * g.sms && sh.units[s] <= kPdlMaxCtas;
    }
    std::printf("  pdl %s: kernel <%d CTA/SM>, %s\n", ps.Name().c_str(), sh.min_blocks,
                occs.c_str());
    if (!fits) {
      std::printf("  pdl %s: skipped (a phase does not fit one wave)\n", ps.Name().c_str());
      continue;
    }
    for (const PdlVariant& v : kPdlVariants) {
      const std::string name = std::string("pdl_") + ps.Name() + "_" + v.name;
      // correctness: one layer launched directly, then the chain as a graph, twice
      PdlShapes one = MakePdlShapes(g, ps, m, 1);
      Poison(g, m), ResetCounters(g), LaunchPdlChain(g, one, 1, v, nullptr);
      CK(cudaStreamSynchronize(g.st));
      Err e1[kShapes], ec[kShapes];
      for (int s = 0; s < kShapes; ++s) e1[s] = Compare(g.act[s], g.ref1[s], m, kN[s], kN[s]);
      cudaGraphExec_t exec = CapturePdl(g, sh, o.layers, v, nullptr);
      Poison(g, m), ResetCounters(g);
      CK(cudaGraphLaunch(exec, g.st));
      CK(cudaStreamSynchronize(g.st));
      for (int s = 0; s < kShapes; ++s) ec[s] = Compare(g.act[s], g.ref[s], m, kN[s], kN[s]);
      CK(cudaMemcpy(bits_a.data(), g.act[3], bits_a.size(), cudaMemcpyDeviceToHost));
      ResetCounters(g);
      CK(cudaGraphLaunch(exec, g.st));
      CK(cudaStreamSynchronize(g.st));
      CK(cudaMemcpy(bits_b.data(), g.act[3], bits_b.size(), cudaMemcpyDeviceToHost));
      const bool det = bits_a == bits_b;
      bool ok = det;
      size_t nf = 0;
      for (int s = 0; s < kShapes; ++s) {
        ok = ok && e1[s].rel <= kLayerTol && ec[s].rel <= kChainTol;
        nf += e1[s].nonfinite + ec[s].nonfinite;
      }
      ok = ok && nf == 0;
      pass = pass && ok;
      std::printf("  check %-46s layer 0: qkv %.2e o %.2e gu %.2e down %.2e | chain final x %.2e "
                  "| non-finite %zu | repeat bit-identical: %s  %s\n",
                  name.c_str(), e1[0].rel, e1[1].rel, e1[2].rel, e1[3].rel, ec[3].rel, nf,
                  det ? "yes" : "no", ok ? "PASS" : "FAIL");
      std::snprintf(b, sizeof b,
                    "%s\n       \"%s\": {\"layer0_rel\": [%s, %s, %s, %s], \"chain_rel\": %s, "
                    "\"nonfinite\": %zu, \"deterministic\": %s, \"pass\": %s, \"min_blocks\": %d",
                    first ? "" : ",", name.c_str(), Json(e1[0].rel).c_str(),
                    Json(e1[1].rel).c_str(), Json(e1[2].rel).c_str(), Json(e1[3].rel).c_str(),
                    Json(ec[3].rel).c_str(), nf, det ? "true" : "false", ok ? "true" : "false",
                    sh.min_blocks);
      js += b, first = false;
      if (!ok) {
        js += "}";
        CK(cudaGraphExecDestroy(exec));
        continue;
      }
      double med, mn;
      TimeIt(
          g, o.iters, 3, [&] { ResetCounters(g); }, [&] { CK(cudaGraphLaunch(exec, g.st)); },
          &med, &mn);
      CK(cudaGraphExecDestroy(exec));
      std::printf("  %-46s median %8.1f us  min %8.1f us  (%d launches, graph, L2 flushed)\n",
                  name.c_str(), med * 1e3, mn * 1e3, nph);
      std::snprintf(b, sizeof b, ", \"median_us\": %s, \"min_us\": %s, \"phases\": {",
                    Json(med * 1e3).c_str(), Json(mn * 1e3).c_str());
      js += b;
      exec = CapturePdl(g, sh, o.layers, v, stamps);
      CK(cudaMemsetAsync(stamps, 0, nstamps * 8, g.st));
      Flush(g, 0), ResetCounters(g);
      CK(cudaGraphLaunch(exec, g.st));
      CK(cudaStreamSynchronize(g.st));
      CK(cudaGraphExecDestroy(exec));
      std::vector<unsigned long long> st(nstamps);
      CK(cudaMemcpy(st.data(), stamps, nstamps * 8, cudaMemcpyDeviceToHost));
      PdlStampSummary(st, sh, nph, ps.cfg, name.c_str(), js);
      js += "}}";
    }
  }
  js += "}, \"pass\": " + std::string(pass ? "true" : "false") + "}";
  CK(cudaFree(stamps));
  return pass;
}

}  // namespace
