// GEMM tests: the cuBLASLt wrapper against cpu::Gemm (fp32 BLAS on the same bf16-rounded inputs)
// for the real model shapes (MiniLM, Qwen3 0.6B and 4B: fused QKV, O, fused gate/up or up, down)
// at M = 1, 7, 128, 512, 2000 tokens, each plain, + bias, + bias + GELU(tanh) and + c in place
// (residual accumulate), all with autotuning on (each problem is tuned at its first, checked,
// run). Also: plan caching, unaligned (16-byte) pointers, CUDA-graph replay of a tuned plan and
// median timings; the tuning tests are in gemm_tuning_gpu_test.cc. Tolerance (gemm_test_util.h):
// max_rel <= 1e-2 (relative error floored at the row RMS; bf16 output rounding alone is <= 2^-9),
// row cosine >= 0.9999.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gemm_test_util.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_cutlass.h"
#include "op_test_util.h"

namespace petal::cuda::test {
namespace {

class GemmGpuTest : public GpuTest {};

struct LayerShape {
  const char* name;
  int n, k;
};

constexpr LayerShape kShapes[] = {
    {"minilm.qkv", 1152, 384},     {"minilm.o", 384, 384},       {"minilm.up", 1536, 384},
    {"minilm.down", 384, 1536},    {"q0.6b.qkv", 4096, 1024},    {"q0.6b.o", 1024, 2048},
    {"q0.6b.gate_up", 6144, 1024}, {"q0.6b.down", 1024, 3072},   {"q4b.qkv", 6144, 2560},
    {"q4b.o", 2560, 4096},         {"q4b.gate_up", 19456, 2560}, {"q4b.down", 2560, 9728},
};
constexpr int kMs[] = {1, 7, 128, 512, 2000};

// Median milliseconds of `iters` runs, timed with events after a warm-up.
double TimeMs(Gemm& gemm, const GemmParams& p, int iters = 20) {
  return MedianLaunchMs([&] { return gemm.Run(p, 0); }, iters);
}

TEST_F(GemmGpuTest, ModelShapes) {
  ASSERT_OK_AND_ASSIGN(auto gemm, Gemm::Create());
  uint64_t seed = 20000;
  for (const LayerShape& s : kShapes) {
    const float scale = std::sqrt(3.f / s.k);  // keeps outputs O(1) so GELU is exercised
    const auto w = RandomBf16(static_cast<size_t>(s.n) * s.k, seed++, -scale, scale);
    const auto bias = RandomBf16(s.n, seed++);
    ASSERT_OK_AND_ASSIGN(auto d_w, UploadBf16(w));
    ASSERT_OK_AND_ASSIGN(auto d_bias, UploadBf16(bias));
    for (int m : kMs) {
      const size_t mn = static_cast<size_t>(m) * s.n;
      const auto x = RandomBf16(static_cast<size_t>(m) * s.k, seed++);
      const auto c = RandomBf16(mn, seed++);
      ASSERT_OK_AND_ASSIGN(auto d_x, UploadBf16(x));
      std::vector<float> plain(mn);
      cpu::Gemm(x.data(), w.data(), nullptr, plain.data(), m, s.n, s.k);
      for (int variant = 0; variant < 4; ++variant) {
        const bool with_bias = variant == 1 || variant == 2, gelu = variant == 2,
                   with_c = variant == 3;
        Guarded<bf16> out;
        ASSERT_OK(out.Init(mn));
        if (with_c) {
          ASSERT_OK_AND_ASSIGN(auto d_c, UploadBf16(c));
          ASSERT_EQ(cudaMemcpy(out.get(), d_c.get(), mn * 2, cudaMemcpyDeviceToDevice),
                    cudaSuccess);
        }
        GemmParams p;
        p.a = d_x.get(), p.w = d_w.get(), p.out = out.get();
        p.bias = with_bias ? d_bias.get() : nullptr;
        p.c = with_c ? out.get() : nullptr;
        p.m = m, p.n = s.n, p.k = s.k, p.gelu_tanh = gelu;
        ASSERT_OK(gemm->Run(p, 0));
        ASSERT_OK(SyncDevice());
        ASSERT_OK_AND_ASSIGN(auto got, DownloadBf16(out.get(), mn));
        std::vector<float> ref = plain;
        for (size_t i = 0; i < mn; ++i) {
          if (with_bias) ref[i] += bias[i % s.n];
          if (gelu) ref[i] = GeluTanh(ref[i]);
          if (with_c) ref[i] += c[i];
        }
        const char* vname[] = {"", " +bias", " +bias+gelu_tanh", " +c(inplace)"};
        const std::string name = std::string(s.name) + " M=" + std::to_string(m) +
                                 " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k) +
                                 vname[variant];
        EXPECT_TRUE(CheckClose("Gemm", name, got, ref, m, s.n, with_c ? kGemmAddendTol : kGemmTol));
        EXPECT_TRUE(out.GuardIntact()) << name;
        if (variant == 0) {
          const double ms = TimeMs(*gemm, p);
          const double flops = 2.0 * m * s.n * s.k;
          const double bytes = 2.0 * (double(m) * s.k + double(s.n) * s.k + double(m) * s.n);
          RecordTiming("Gemm", name, ms, flops / ms / 1e9, bytes / ms / 1e6);
        }
      }
    }
  }
  // Plans are cached per problem: running a known problem again adds none.
  const size_t plans = gemm->num_plans();
  EXPECT_EQ(plans, std::size(kShapes) * std::size(kMs) * 4);
  // Every first use was eager, so each plan was tuned or too large for the tuning scratch.
  const GemmStats stats = gemm->Stats();
  EXPECT_EQ(stats.tuned + stats.too_large, plans);
  EXPECT_EQ(stats.small_m_rejected, 0u);
  EXPECT_GT(stats.tuned, 0u);
  std::printf("%s\n", stats.ToString().c_str());
}

TEST_F(GemmGpuTest, UnalignedPointersAndGraphReplay) {
  ASSERT_OK_AND_ASSIGN(auto gemm, Gemm::Create());
  const int m = 77, n = 1536, k = 384;
  // Offsets of 8 elements (16 bytes): legal for cuBLASLt, but not the 256-byte default it
  // assumes; the plan must be chosen for the real alignment.
  const int off = 8;
  const auto x = RandomBf16(static_cast<size_t>(m) * k + off, 1);
  const auto w = RandomBf16(static_cast<size_t>(n) * k + off, 2, -0.1f, 0.1f);
  const auto bias = RandomBf16(n + off, 3);
  ASSERT_OK_AND_ASSIGN(auto d_x, UploadBf16(x));
  ASSERT_OK_AND_ASSIGN(auto d_w, UploadBf16(w));
  ASSERT_OK_AND_ASSIGN(auto d_bias, UploadBf16(bias));
  DeviceBuffer<bf16> d_out;
  ASSERT_OK(d_out.Allocate(static_cast<size_t>(m) * n + off));
  GemmParams p;
  p.a = d_x.get() + off, p.w = d_w.get() + off, p.bias = d_bias.get() + off;
  p.out = d_out.get() + off, p.m = m, p.n = n, p.k = k, p.gelu_tanh = true;

  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_OK(gemm->Prepare(p, stream));  // plan (and tune) before capture
  EXPECT_EQ(gemm->Stats().tuned, 1u);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status run = gemm->Run(p, stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_OK(run);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (uint64_t seed : {10, 11}) {
    // New activations in the same buffer, then replay.
    const auto x2 = RandomBf16(static_cast<size_t>(m) * k + off, seed);
    ASSERT_OK_AND_ASSIGN(auto staged, UploadBf16(x2));
    ASSERT_EQ(cudaMemcpy(d_x.get(), staged.get(), x2.size() * 2, cudaMemcpyDeviceToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemset(d_out.get(), 0xFF, d_out.bytes()), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_OK_AND_ASSIGN(auto got, DownloadBf16(d_out.get() + off, static_cast<size_t>(m) * n));
    std::vector<float> ref(static_cast<size_t>(m) * n);
    cpu::Gemm(x2.data() + off, w.data() + off, bias.data() + off, ref.data(), m, n, k);
    for (auto& v : ref) v = GeluTanh(v);
    EXPECT_TRUE(CheckClose("Gemm", "graph replay, 16B-aligned ptrs seed=" + std::to_string(seed),
                           got, ref, m, n, kGemmTol));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace petal::cuda::test
