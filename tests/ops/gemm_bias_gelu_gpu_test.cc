// The fused BERT FFN-input GEMM (gemm_fused.h, GemmBiasGelu) as harness cases: gelu(x W^T + b)
// against cpu::Gemm (fp32 BLAS on the same bf16 inputs, with the bias) followed by cpu::Gelu
// (exact erf form), for every tile configuration, the MiniLM-L6 and BERT-base shapes and small
// ones (M and N not multiples of the tile), with and without a bias; bad arguments refused.
// Tolerance: as gemm_gpu_test (max_rel <= 1e-2 floored at the row RMS, row cosine >= 0.9999).
// Timings (fused vs cuBLASLt with its bias epilogue + LaunchGelu) are printed and recorded,
// never asserted.
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_fused.h"
#include "op_harness.h"

namespace petal::cuda::test {
namespace {

class GemmBiasGeluGpuTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    if (!GemmSwigluAvailable()) GTEST_SKIP() << "fused GEMMs not built or not on sm_90";
    ASSERT_OK(PrepareGemmSwiglu());
  }
};

constexpr Tolerance kTol{1e-2, 0.9999};

void RunBiasGelu(int m, int n, int k, bool with_bias, int config, uint64_t seed) {
  const auto x = RandomBf16(static_cast<size_t>(m) * k, seed, -2.f, 2.f);
  const auto w = RandomBf16(static_cast<size_t>(n) * k, seed + 1, -0.1f, 0.1f);
  const auto bias = RandomBf16(n, seed + 2, -1.f, 1.f);
  OpCase c;
  c.op = "GemmBiasGelu";
  c.shape = "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
            (with_bias ? " bias " : " ") + GemmBiasGeluConfigName(config);
  OpOutput o;
  o.rows = m, o.cols = n, o.tol = kTol;
  c.outputs = {o};
  c.gpu = [=](const std::vector<void*>& out) -> Status {
    PETAL_ASSIGN_OR_RETURN(auto d_x, UploadBf16(x));
    PETAL_ASSIGN_OR_RETURN(auto d_w, UploadBf16(w));
    PETAL_ASSIGN_OR_RETURN(auto d_b, UploadBf16(bias));
    PETAL_RETURN_IF_ERROR(LaunchGemmBiasGelu({d_x.get(), d_w.get(), with_bias ? d_b.get() : nullptr,
                                              static_cast<bf16*>(out[0]), m, n, k, config},
                                             0));
    return SyncDevice();
  };
  c.reference = [=] {
    std::vector<float> ref(static_cast<size_t>(m) * n);
    cpu::Gemm(x.data(), w.data(), with_bias ? bias.data() : nullptr, ref.data(), m, n, k);
    cpu::Gelu(ref.data(), static_cast<int64_t>(ref.size()));
    return std::vector<std::vector<float>>{ref};
  };
  EXPECT_TRUE(RunOpCase(c));
}

TEST_F(GemmBiasGeluGpuTest, MatchesGemmBiasThenGelu) {
  uint64_t seed = 14000;
  for (int config = 0; config < GemmBiasGeluConfigs(); ++config) {
    for (int m : {1, 77, 128, 1000}) {
      RunBiasGelu(m, 1536, 384, true, config, seed += 3);  // MiniLM-L6
      RunBiasGelu(m, 40, 64, true, config, seed += 3);     // a partial tile in N
    }
    RunBiasGelu(300, 3072, 768, true, config, seed += 3);   // BERT-base
    RunBiasGelu(300, 1536, 384, false, config, seed += 3);  // no bias
    RunBiasGelu(4096, 1536, 384, true, config, seed += 3);
  }
}

TEST_F(GemmBiasGeluGpuTest, RejectsBadArguments) {
  DeviceBuffer<bf16> a, b;
  ASSERT_OK(a.Allocate(64 * 64));
  ASSERT_OK(b.Allocate(64 * 64));
  const GemmBiasGeluParams ok{a.get(), a.get(), nullptr, b.get(), 4, 16, 16, 0};
  EXPECT_TRUE(LaunchGemmBiasGelu(ok, 0).ok());
  GemmBiasGeluParams p = ok;
  p.n = 12;  // not a multiple of 8
  EXPECT_FALSE(LaunchGemmBiasGelu(p, 0).ok());
  p = ok, p.k = 20;
  EXPECT_FALSE(LaunchGemmBiasGelu(p, 0).ok());
  p = ok, p.config = GemmBiasGeluConfigs();
  EXPECT_FALSE(LaunchGemmBiasGelu(p, 0).ok());
  p = ok, p.out = nullptr;
  EXPECT_FALSE(LaunchGemmBiasGelu(p, 0).ok());
  p = ok, p.x = a.get() + 1;  // 2-byte aligned
  EXPECT_FALSE(LaunchGemmBiasGelu(p, 0).ok());
  ASSERT_OK(SyncDevice());
}

TEST_F(GemmBiasGeluGpuTest, TimingFusedVsGemmThenGelu) {
  auto gemm_or = Gemm::Create();
  ASSERT_OK(gemm_or.status());
  Gemm& gemm = **gemm_or;
  struct Shape {
    const char* name;
    int n, k;
  };
  for (const Shape s : {Shape{"minilm", 1536, 384}, Shape{"bert-base", 3072, 768}}) {
    for (int m : {128, 512, 2048, 16384}) {
      DeviceBuffer<bf16> x, w, bias, out;
      ASSERT_OK(x.Allocate(static_cast<size_t>(m) * s.k));
      ASSERT_OK(w.Allocate(static_cast<size_t>(s.n) * s.k));
      ASSERT_OK(bias.Allocate(s.n));
      ASSERT_OK(out.Allocate(static_cast<size_t>(m) * s.n));
      cudaMemset(x.get(), 0x3c, x.bytes());  // ~0.01: finite, not zero
      cudaMemset(w.get(), 0x3c, w.bytes());
      cudaMemset(bias.get(), 0x3c, bias.bytes());
      const GemmParams gp{x.get(), w.get(), bias.get(), nullptr, out.get(), m, s.n, s.k};
      const int64_t n_out = static_cast<int64_t>(m) * s.n;
      const double unfused = MedianLaunchMs([&] {
        (void)gemm.Run(gp, 0);
        return LaunchGelu({out.get(), out.get(), n_out}, 0);
      });
      const double flops = 2.0 * m * s.n * s.k;
      const std::string shape = std::string(s.name) + " m=" + std::to_string(m);
      RecordTiming("GemmThenGelu", shape, unfused, flops / unfused * 1e-9, 0);
      std::string line = shape + ": cuBLASLt+Gelu " + std::to_string(unfused * 1e3) + " us";
      for (int config = 0; config < GemmBiasGeluConfigs(); ++config) {
        const double fused = MedianLaunchMs([&] {
          return LaunchGemmBiasGelu({x.get(), w.get(), bias.get(), out.get(), m, s.n, s.k, config},
                                    0);
        });
        RecordTiming("GemmBiasGelu", shape + " " + GemmBiasGeluConfigName(config), fused,
                     flops / fused * 1e-9, 0);
        line += ", " + GemmBiasGeluConfigName(config) + " " + std::to_string(fused * 1e3) + " us";
      }
      std::printf("%s\n", line.c_str());
      ASSERT_OK(SyncDevice());
    }
  }
}

}  // namespace
}  // namespace petal::cuda::test
