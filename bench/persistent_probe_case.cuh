// Host side of bench/persistent_probe.cu: one M on the GPU (RunCase): the cuBLASLt references, the
// correctness check of every variant, the timing (cuBLASLt graph vs each persistent variant) and
// the stamped run's per-phase summary, printed and appended to the JSON; then, with --modes pdl,
// the per-phase-launch chain (persistent_probe_pdl_host.cuh). Returns 0, 1 (correctness
// FAIL, timing skipped) or 2 (the kernel does not fit).
#pragma once
#include <string>
#include <vector>

#include "persistent_probe_pdl_host.cuh"

namespace {

int RunCase(Gpu& g, const Options& o, size_t mi, const std::vector<PlanSet>& pss, std::string& js) {
  char b[1024];
  const int phases = kLayers * kShapes;
  const int m = o.ms[mi];
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
    for (int vi = 0; vi < (o.mode_persistent ? kNumVariants : 0); ++vi)
      runs.push_back({&ps, kVariants[vi],
                      std::string(kPathNames[ps.path]) + (ps.acts_tma ? "_atma_" : "_") +
                          kVariants[vi].name + "_wk" + kWkNames[ps.wkred] + ps.StageSuffix()});
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
                  "\"stage_k\": %d, \"stages\": %d, \"smem_bytes\": %d",
                  wi ? ", " : "", pss[wi].Name().c_str(), pss[wi].arena, pss[wi].act_bytes,
                  pss[wi].stage_bytes, pss[wi].akc, pss[wi].astages, pss[wi].smem);
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
    js += "}";
    return 1;
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
    std::snprintf(b, sizeof b, ", \"timer_step_ns\": %s}", Json(step < 1e30 ? step : NAN).c_str());
    stamp_js += b;
  }
  js += "}" + stamp_js + "}";
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  const bool pdl_ok = !o.mode_pdl || RunPdl(g, o, m, pss, js);
  js += "}";
  return pdl_ok ? 0 : 1;
}

}  // namespace
