// L2 prefetcher tests: a chain of the 0.6b shape's four GEMMs (M = 128) run with the prefetcher
// one GEMM ahead, eagerly and as a captured graph replayed twice, gives bit-identical outputs to
// the same chain without it (the prefetch is a hint: same plans, same kernels, same numbers); the
// chain's graph time with and without is printed (not asserted: benchmarks measure speed);
// unaligned spans are refused; a disabled pass forks nothing.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "kernels/cuda/gemm.h"
#include "kernels/cuda/l2_prefetch.h"
#include "op_test_util.h"

namespace petal::cuda::test {
namespace {

class L2PrefetchGpuTest : public GpuTest {};

struct Chain {
  static constexpr int kM = 128;
  struct Step {
    int n, k;
  };
  // QKV, O, gate/up, down of the 0.6b shape; each input is the previous output's first k columns
  // (all outputs are [kM, n] with n >= the next k).
  static constexpr Step kSteps[] = {{4096, 1024}, {1024, 2048}, {6144, 1024}, {1024, 3072}};
  std::vector<DeviceBuffer<bf16>> w, out;
  DeviceBuffer<bf16> x;
  std::vector<L2Prefetcher::Span> spans;

  Status Init() {
    uint64_t seed = 4100;
    PETAL_ASSIGN_OR_RETURN(x, UploadBf16(RandomBf16(size_t(kM) * 1024, seed++)));
    for (const Step& s : kSteps) {
      PETAL_ASSIGN_OR_RETURN(auto wb,
                             UploadBf16(RandomBf16(size_t(s.n) * s.k, seed++, -0.03f, 0.03f)));
      spans.push_back({wb.get(), wb.bytes()});
      w.push_back(std::move(wb));
      DeviceBuffer<bf16> o;
      PETAL_RETURN_IF_ERROR(o.Allocate(size_t(kM) * 6144));
      out.push_back(std::move(o));
    }
    return Status::Ok();
  }
  // Enqueues the chain; with `pf` the prefetcher runs one pass around it.
  Status Run(Gemm& gemm, L2Prefetcher* pf, cudaStream_t stream) {
    if (pf) pf->Begin(true);
    for (size_t j = 0; j < w.size(); ++j) {
      const Step& s = kSteps[j];
      if (pf) PETAL_RETURN_IF_ERROR(pf->BeforeGemm(j, stream));
      GemmParams p;
      p.a = j == 0 ? x.get() : out[j - 1].get();
      p.w = w[j].get();
      p.out = out[j].get();
      p.m = kM, p.n = s.n, p.k = s.k;
      PETAL_RETURN_IF_ERROR(gemm.Run(p, stream));
    }
    return pf ? pf->End(stream) : Status::Ok();
  }
  StatusOr<std::vector<float>> Last() { return DownloadBf16(out.back().get(), size_t(kM) * 1024); }
};

// Graph of the chain, captured on `stream`.
StatusOr<cudaGraphExec_t> Capture(Chain& c, Gemm& gemm, L2Prefetcher* pf, cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  PETAL_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const Status run = c.Run(gemm, pf, stream);
  PETAL_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  PETAL_RETURN_IF_ERROR(run);
  cudaGraphExec_t exec = nullptr;
  PETAL_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaGraphDestroy(graph);
  return exec;
}

double GraphUs(cudaGraphExec_t exec, cudaStream_t stream, int iters = 200) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms(iters);
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(a, stream);
    cudaGraphLaunch(exec, stream);
    cudaEventRecord(b, stream);
    cudaEventSynchronize(b);
    cudaEventElapsedTime(&ms[i], a, b);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return 1000.0 * ms[iters / 2];
}

TEST_F(L2PrefetchGpuTest, SameBitsEagerAndCaptured) {
  Chain c;
  ASSERT_OK(c.Init());
  ASSERT_OK_AND_ASSIGN(auto gemm, Gemm::Create());
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_OK(c.Run(*gemm, nullptr, stream));  // plans and tunes every GEMM
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_OK_AND_ASSIGN(const auto ref, c.Last());

  L2Prefetcher pf;
  ASSERT_OK(pf.Init(1));
  pf.SetSpans(c.spans);
  ASSERT_EQ(cudaMemset(c.out.back().get(), 0xFF, c.out.back().bytes()), cudaSuccess);  // poison
  ASSERT_OK(c.Run(*gemm, &pf, stream));
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_OK_AND_ASSIGN(const auto eager, c.Last());
  EXPECT_EQ(eager, ref);

  ASSERT_OK_AND_ASSIGN(cudaGraphExec_t with, Capture(c, *gemm, &pf, stream));
  ASSERT_OK_AND_ASSIGN(cudaGraphExec_t without, Capture(c, *gemm, nullptr, stream));
  for (int rep = 0; rep < 2; ++rep) {
    ASSERT_EQ(cudaMemset(c.out.back().get(), 0xFF, c.out.back().bytes()), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(with, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_OK_AND_ASSIGN(const auto replay, c.Last());
    EXPECT_EQ(replay, ref) << "replay " << rep;
  }
  const double us_without = GraphUs(without, stream), us_with = GraphUs(with, stream);
  std::printf(
      "[l2 prefetch] 4 GEMMs of the 0.6b shape at M = 128, graph median: %.1f us without,"
      " %.1f us with (one ahead)\n",
      us_without, us_with);
  cudaGraphExecDestroy(with);
  cudaGraphExecDestroy(without);
  cudaStreamDestroy(stream);
}

TEST_F(L2PrefetchGpuTest, RefusesUnalignedAndDisabledPassForksNothing) {
  DeviceBuffer<bf16> b;
  ASSERT_OK(b.Allocate(1024));
  EXPECT_FALSE(LaunchL2Prefetch(reinterpret_cast<const char*>(b.get()) + 2, 512, 0).ok());
  EXPECT_TRUE((LaunchL2Prefetch(b.get(), 2048, 0)).ok());
  L2Prefetcher pf;
  ASSERT_OK(pf.Init(2));
  pf.SetSpans({{b.get(), b.bytes()}});
  pf.Begin(false);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  // A disabled pass adds no node: a captured graph of it is empty.
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status s1 = pf.BeforeGemm(0, stream), s2 = pf.End(stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_TRUE((s1).ok());
  EXPECT_TRUE((s2).ok());
  size_t nodes = 99;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 0u);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  EXPECT_TRUE((SyncDevice()).ok());
}

}  // namespace
}  // namespace petal::cuda::test
