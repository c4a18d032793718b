// GEMM tuning tests (the rest of gemm_gpu_test.cc's plan; same tolerances): tuning touches neither
// the caller's output nor its addend, a first use during graph capture falls back to the
// heuristic plan and tunes later, every tuning candidate (split-K variants included) is correct
// when forced, chained timing (gemm_chain.h), the autotune switch and scratch bound, and bad shapes
// are refused.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gemm_test_util.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_cutlass.h"
#include "kernels/cuda/gemm_wgmma.h"
#include "op_test_util.h"

namespace petal::cuda::test {
namespace {

class GemmTuningGpuTest : public GpuTest {};

// One problem on the device with its CPU reference: ref = gelu?(x w^T + bias + c).
struct Spec {
  int m, n, k;
  bool bias, gelu, addend;
};
struct Problem {
  explicit Problem(const Spec& s)
      : m(s.m), n(s.n), k(s.k), bias(s.bias), gelu(s.gelu), addend(s.addend) {}
  int m, n, k;
  bool bias, gelu, addend;
  std::vector<float> x, w, b, c, ref;
  DeviceBuffer<bf16> dx, dw, db, dc, dout;

  Status Init(uint64_t seed) {
    const float scale = std::sqrt(3.f / k);
    x = RandomBf16(size_t(m) * k, seed);
    w = RandomBf16(size_t(n) * k, seed + 1, -scale, scale);
    b = RandomBf16(n, seed + 2);
    c = RandomBf16(size_t(m) * n, seed + 3);
    ref.assign(size_t(m) * n, 0.f);
    cpu::Gemm(x.data(), w.data(), bias ? b.data() : nullptr, ref.data(), m, n, k);
    for (size_t i = 0; i < ref.size(); ++i) {  // Gemm's order: epilogue(a w^T + c + bias)
      if (addend) ref[i] += c[i];
      if (gelu) ref[i] = GeluTanh(ref[i]);
    }
    PETAL_ASSIGN_OR_RETURN(dx, UploadBf16(x));
    PETAL_ASSIGN_OR_RETURN(dw, UploadBf16(w));
    PETAL_ASSIGN_OR_RETURN(db, UploadBf16(b));
    PETAL_ASSIGN_OR_RETURN(dc, UploadBf16(c));
    return dout.Allocate(size_t(m) * n);
  }
  // Resets out to c (the in-place addend), or poisons it with NaN.
  Status ResetOut(cudaStream_t stream) {
    if (addend)
      PETAL_CUDA_CHECK(
          cudaMemcpyAsync(dout.get(), dc.get(), dout.bytes(), cudaMemcpyDeviceToDevice, stream));
    else
      PETAL_CUDA_CHECK(cudaMemsetAsync(dout.get(), 0xFF, dout.bytes(), stream));
    return Status::Ok();
  }
  // In place when addend: c is out.
  GemmParams Params() const {
    GemmParams p;
    p.a = dx.get(), p.w = dw.get(), p.bias = bias ? db.get() : nullptr;
    p.c = addend ? dout.get() : nullptr, p.out = dout.get();
    p.m = m, p.n = n, p.k = k, p.gelu_tanh = gelu;
    return p;
  }
  std::string Name(const std::string& what) const {
    return what + " M=" + std::to_string(m) + " N=" + std::to_string(n) +
           " K=" + std::to_string(k) + (bias ? " +bias" : "") + (gelu ? " +gelu_tanh" : "") +
           (addend ? " +c(inplace)" : "");
  }
  ::testing::AssertionResult Check(const std::string& what) const {
    auto got = DownloadBf16(dout.get(), size_t(m) * n);
    if (!got.ok()) return ::testing::AssertionFailure() << got.status().ToString();
    return CheckClose("Gemm", Name(what), *got, ref, m, n, addend ? kGemmAddendTol : kGemmTol);
  }
};

// Bitwise: the device array holds exactly `want` (bf16 values, so float equality is exact).
::testing::AssertionResult Unchanged(const std::string& name, const bf16* d,
                                     const std::vector<float>& want) {
  auto got = DownloadBf16(d, want.size());
  if (!got.ok()) return ::testing::AssertionFailure() << got.status().ToString();
  int64_t diff = 0;
  for (size_t i = 0; i < want.size(); ++i) diff += std::memcmp(&(*got)[i], &want[i], 4) != 0;
  return RecordExact("Gemm", name, diff);
}

TEST_F(GemmTuningGpuTest, TuningTouchesNeitherOutputNorAddend) {
  // A separate addend (BERT's residual) and a poisoned output: Prepare tunes, reading a, w, c
  // and writing only its scratch, so out keeps its poison and c its values.
  ASSERT_OK_AND_ASSIGN(auto gemm, Gemm::Create());
  Problem pr(Spec{128, 1024, 3072, true, false, true});
  ASSERT_OK(pr.Init(300));
  GemmParams p = pr.Params();
  p.c = pr.dc.get();  // separate addend
  ASSERT_EQ(cudaMemset(pr.dout.get(), 0x3F, pr.dout.bytes()), cudaSuccess);
  ASSERT_OK(gemm->Prepare(p));
  ASSERT_OK(SyncDevice());
  EXPECT_EQ(gemm->Stats().tuned, 1u);
  const std::vector<float> poison(pr.ref.size(), RoundBf16(FromBf16Bits(0x3F3F)));
  EXPECT_TRUE(Unchanged("Prepare(tuning) leaves out alone", pr.dout.get(), poison));
  EXPECT_TRUE(Unchanged("Prepare(tuning) leaves c alone", pr.dc.get(), pr.c));
  ASSERT_OK(gemm->Run(p, 0));
  ASSERT_OK(SyncDevice());
  EXPECT_TRUE(pr.Check("tuned, separate c"));
  EXPECT_TRUE(Unchanged("Run leaves c alone", pr.dc.get(), pr.c));

  // In place (Qwen3's residual): the first Run of a fresh plan tunes, then computes once; the
  // result is right only if tuning left the addend (= out) alone.
  for (int m : {1, 16, 128, 512}) {
    ASSERT_OK_AND_ASSIGN(auto fresh, Gemm::Create());
    Problem in(Spec{m, 1024, 3072, false, false, true});
    ASSERT_OK(in.Init(310 + m));
    ASSERT_OK(in.ResetOut(0));
    ASSERT_OK(fresh->Run(in.Params(), 0));
    ASSERT_OK(SyncDevice());
    EXPECT_EQ(fresh->Stats().tuned, 1u);
    EXPECT_TRUE(in.Check("tuned at first use, in place"));
  }
}

TEST_F(GemmTuningGpuTest, FirstUseDuringCaptureFallsBackThenTunes) {
  ASSERT_OK_AND_ASSIGN(auto gemm, Gemm::Create());
  Problem pr(Spec{64, 4096, 1024, true, false, true});
  ASSERT_OK(pr.Init(400));
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status run = gemm->Run(pr.Params(), stream);
  // Tuning would have synchronised and invalidated the capture: EndCapture would fail.
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_OK(run);
  GemmStats st = gemm->Stats();
  EXPECT_EQ(st.plans, 1u);
  EXPECT_EQ(st.untuned, 1u);
  EXPECT_EQ(st.tuned, 0u);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_OK(pr.ResetOut(stream));
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(pr.Check("captured at first use (heuristic choice)"));

  // The next eager use tunes; the graph keeps the algorithm it captured and stays correct.
  ASSERT_OK(pr.ResetOut(stream));
  ASSERT_OK(gemm->Run(pr.Params(), stream));
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  st = gemm->Stats();
  EXPECT_EQ(st.tuned, 1u);
  EXPECT_GT(st.tune_ms, 0.0);
  EXPECT_TRUE(pr.Check("eager after capture (tuned now)"));
  ASSERT_OK(pr.ResetOut(stream));
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_TRUE(pr.Check("graph replay after tuning"));
  std::printf("%s\n", st.ToString().c_str());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Forces each candidate in turn (fresh Gemm each time) so that a wrong split-K variant, epilogue
// or small-M kernel configuration (the last candidates, algo -1) cannot hide behind a faster
// choice on this GPU. Forced choices skip the tuner's own agreement check on purpose.
TEST_F(GemmTuningGpuTest, EveryCandidateIsCorrect) {
  const Spec cases[] = {
      {16, 1024, 3072, false, false, true},  // 0.6b down, small M, residual in place
      {7, 1152, 384, true, true, false},     // MiniLM QKV shape with bias + GELU
      {128, 4096, 1024, true, false, false},
      {1, 2560, 9728, false, false, true},     // 4b down, M = 1
      {77, 1536, 384, true, false, true},      // partial token tiles, bias + residual in place
      {300, 1024, 2048, false, false, true},   // cluster kernel only: M > 128, 0.6b O + residual
      {128, 6144, 1024, false, false, false},  // 0.6b gate_up at 1 x 128 (CUTLASS's target)
      {512, 1024, 3072, false, false, true},   // 0.6b down at 1 x 512, residual in place
  };
  uint64_t seed = 500;
  setenv("PETAL_GEMM_WGMMA", "1", 1);  // off by default, still must be right
  for (const Spec& spec : cases) {
    Problem pr(spec);
    ASSERT_OK(pr.Init(seed += 10));
    GemmOptions all;
    all.cluster_kernel = true;  // off by default (slower on the H200), still must be right
    ASSERT_OK_AND_ASSIGN(auto probe, Gemm::Create(all));
    ASSERT_OK(pr.ResetOut(0));
    ASSERT_OK(probe->Run(pr.Params(), 0));
    ASSERT_OK(SyncDevice());
    const int n_cand = probe->Stats().per_plan.at(0).candidates;
    EXPECT_GT(n_cand, 0);
    int split_k = 0, ours = 0, cluster = 0, cutlass = 0, wgmma = 0;
    for (int i = 0; i < n_cand; ++i) {
      GemmOptions o = all;
      o.force_candidate = i;
      o.timed_runs = 1;
      o.cold_l2 = false;
      ASSERT_OK_AND_ASSIGN(auto g, Gemm::Create(o));
      ASSERT_OK(pr.ResetOut(0));
      ASSERT_OK(g->Run(pr.Params(), 0));
      ASSERT_OK(SyncDevice());
      const GemmPlanInfo info = g->Stats().per_plan.at(0);
      split_k += info.split_k > 1;
      ours += info.algo_id < 0;
      cluster += info.algo_id == -2;
      cutlass += info.algo_id == -3;
      wgmma += info.algo_id == -4;
      EXPECT_TRUE(pr.Check("candidate " + std::to_string(i) + " " + info.ToString()));
    }
    std::printf(
        "%s: %d candidates checked, %d with split-K, %d of them ours (%d cluster, %d CUTLASS, %d "
        "wgmma)\n",
        pr.Name("").c_str(), n_cand, split_k, ours, cluster, cutlass, wgmma);
    if (CutlassGemmAvailable() && !spec.bias && !spec.gelu && spec.m <= kCutlassGemmMaxM) {
      EXPECT_GT(cutlass, 0) << "CUTLASS kernels not among the candidates";
    }
    if (spec.m <= 128) {
      EXPECT_GT(ours - cluster - cutlass - wgmma, 0) << "small-M kernel not among the candidates";
    }
    if (spec.m <= 512) {
      EXPECT_GT(cluster, 0) << "cluster kernel not among the candidates";
    }
    GemmParams any = pr.Params();
    if (WgmmaGemmSupported(any, 0, 1) || WgmmaGemmSupported(any, 1, 1) ||
        WgmmaGemmSupported(any, 4, 1)) {
      EXPECT_GT(wgmma, 0) << "wgmma kernel not among the candidates";
    }
  }
}

// Chained timing (gemm_chain.h): on a capturable stream every plan is timed as chains and the
// choice computes the right result, tuning touching neither out nor the in-place addend; on the
// legacy stream (which cannot capture) tuning falls back to lone launches.
TEST_F(GemmTuningGpuTest, ChainedTuningChoosesACorrectPlan) {
  unsetenv("PETAL_GEMM_TUNE_CHAIN");  // it would override the options
  const Spec cases[] = {
      {1, 1024, 3072, false, false, true},    // 0.6b down at batch 1, residual in place
      {128, 4096, 1024, true, false, false},  // 0.6b QKV shape with bias
      {7, 1536, 384, true, true, false},      // MiniLM up with bias + GELU (small weights)
      {1, 2560, 9728, false, false, true},    // 4b down (50 MB): see the pool below
  };
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  uint64_t seed = 700;
  for (const Spec& spec : cases) {
    Problem pr(spec);
    ASSERT_OK(pr.Init(seed += 10));
    GemmOptions o;
    o.chain_max_m = 512;
    o.cluster_kernel = true;                             // our kernels must capture too
    if (spec.n == 2560) o.chain_pool_bytes = 64u << 20;  // weights over half: no copies
    ASSERT_OK_AND_ASSIGN(auto gemm, Gemm::Create(o));
    ASSERT_OK(pr.ResetOut(stream));
    ASSERT_OK(gemm->Run(pr.Params(), stream));
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const GemmPlanInfo info = gemm->Stats().per_plan.at(0);
    EXPECT_EQ(info.state, "tuned");
    EXPECT_TRUE(info.chained) << info.ToString();
    EXPECT_GT(info.first_us, 0.f);
    EXPECT_GT(info.chosen_us, 0.f);
    EXPECT_TRUE(pr.Check("chained tuning, first use " + info.ToString()));
    std::printf("%s\n", info.ToString().c_str());
  }
  Problem pr(Spec{16, 1024, 2048, false, false, true});
  ASSERT_OK(pr.Init(800));
  GemmOptions o;
  o.chain_max_m = 512;
  ASSERT_OK_AND_ASSIGN(auto legacy, Gemm::Create(o));
  ASSERT_OK(pr.ResetOut(0));
  ASSERT_OK(legacy->Run(pr.Params(), 0));
  ASSERT_OK(SyncDevice());
  const GemmPlanInfo info = legacy->Stats().per_plan.at(0);
  EXPECT_EQ(info.state, "tuned");
  EXPECT_FALSE(info.chained) << "the legacy stream cannot capture: lone launches expected";
  EXPECT_TRUE(pr.Check("legacy stream, lone-launch fallback"));
  cudaStreamDestroy(stream);
}

// Outputs past the scratch: untuned by default, tuned into a buffer of their own with
// tune_large_bytes, which leaves the caller's output and in-place addend alone.
TEST_F(GemmTuningGpuTest, LargeOutputsTunedWhenAllowed) {
  unsetenv("PETAL_GEMM_TUNE_LARGE_MB");  // it would override the options
  for (const bool allow : {false, true}) {
    GemmOptions o;
    o.tune_scratch_bytes = 1u << 20;  // 1 MiB: the 4 MiB output below is past it
    o.tune_large_bytes = allow ? 64u << 20 : 0;
    ASSERT_OK_AND_ASSIGN(auto gemm, Gemm::Create(o));
    Problem pr(Spec{512, 4096, 1024, false, false, true});
    ASSERT_OK(pr.Init(900));
    ASSERT_OK(pr.ResetOut(0));
    ASSERT_OK(gemm->Run(pr.Params(), 0));  // tunes (or not), then computes once in place
    ASSERT_OK(SyncDevice());
    const GemmPlanInfo info = gemm->Stats().per_plan.at(0);
    EXPECT_EQ(info.state, allow ? "tuned" : "too_large") << info.ToString();
    EXPECT_TRUE(pr.Check(std::string("large output, ") + (allow ? "tuned" : "untuned")));
  }
}

TEST_F(GemmTuningGpuTest, AutotuneSwitchAndScratchBound) {
  GemmOptions o;
  o.autotune = false;
  ASSERT_OK_AND_ASSIGN(auto gemm, Gemm::Create(o));
  Problem pr(Spec{96, 1536, 384, true, false, false});
  ASSERT_OK(pr.Init(600));
  ASSERT_OK(pr.ResetOut(0));
  ASSERT_OK(gemm->Run(pr.Params(), 0));
  ASSERT_OK(SyncDevice());
  EXPECT_EQ(gemm->Stats().untuned, 1u);
  EXPECT_TRUE(pr.Check("autotune off"));
  gemm->set_autotune(true);  // the pending plan is tuned at its next eager use
  ASSERT_OK(pr.ResetOut(0));
  ASSERT_OK(gemm->Run(pr.Params(), 0));
  ASSERT_OK(SyncDevice());
  EXPECT_EQ(gemm->Stats().tuned, 1u);
  EXPECT_TRUE(pr.Check("autotune switched on"));

  // A problem whose output exceeds the tuning scratch keeps the heuristic's choice (with large
  // outputs not allowed; LargeOutputsTunedWhenAllowed covers them).
  GemmOptions small;
  small.tune_scratch_bytes = 1 << 20;
  small.tune_large_bytes = 0;
  ASSERT_OK_AND_ASSIGN(auto bounded, Gemm::Create(small));
  Problem big(Spec{512, 4096, 1024, false, false, true});
  ASSERT_OK(big.Init(610));
  ASSERT_OK(big.ResetOut(0));
  ASSERT_OK(bounded->Run(big.Params(), 0));
  ASSERT_OK(SyncDevice());
  EXPECT_EQ(bounded->Stats().too_large, 1u);
  EXPECT_TRUE(big.Check("output larger than the tuning scratch"));
}

TEST_F(GemmTuningGpuTest, RejectsBadShapes) {
  ASSERT_OK_AND_ASSIGN(auto gemm, Gemm::Create(1 << 20));
  DeviceBuffer<bf16> buf;
  ASSERT_OK(buf.Allocate(4096));
  GemmParams p;
  p.a = p.w = buf.get();
  p.out = buf.get();
  p.m = 4, p.n = 12, p.k = 30;  // k not a multiple of 8
  EXPECT_EQ(gemm->Run(p, 0).code(), StatusCode::kInvalidArgument);
  p.n = 16, p.k = 32, p.m = 0;  // valid shape, empty batch: a no-op
  EXPECT_TRUE(gemm->Run(p, 0).ok());
}

}  // namespace
}  // namespace petal::cuda::test
