// The fused GEMMs (gemm_fused.h) as harness cases. GemmSwiglu: weights uploaded in the
// checkpoint's [gate; up] layout, interleaved on the device (LaunchInterleaveGateUp), then the
// fused kernel, against cpu::Gemm (fp32 BLAS on the same bf16 inputs) followed by cpu::SiluMul,
// for every tile configuration, the Qwen3 0.6B / 4B shapes and small ones (M and N not multiples
// of the tile); the unfused companion (LaunchSiluMulInterleaved) against cpu::SiluMul.
// GemmQkvRope: against cpu::Gemm + bias followed by cpu::QkNormRope (fp64 angles), ragged
// batches, with and without bias / norm / rotary.
// Tolerance: as gemm_gpu_test (max_rel <= 1e-2 floored at the row RMS, row cosine >= 0.9999).
// Timings (fused vs cuBLASLt + SiluMul) are printed and recorded, never asserted.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/reference_ops.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_fused.h"
#include "op_harness.h"

namespace petal::cuda::test {
namespace {

class GemmFusedGpuTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    if (!GemmSwigluAvailable()) GTEST_SKIP() << "fused SwiGLU GEMM not built or not on sm_90";
    ASSERT_OK(PrepareGemmSwiglu());
  }
};

constexpr Tolerance kTol{1e-2, 0.9999};

// x W^T then SwiGLU, W in the checkpoint's layout (gate rows, then up rows).
std::vector<float> Reference(const std::vector<float>& x, const std::vector<float>& w, int m,
                             int inter, int k) {
  std::vector<float> gu(static_cast<size_t>(m) * 2 * inter), out(static_cast<size_t>(m) * inter);
  cpu::Gemm(x.data(), w.data(), nullptr, gu.data(), m, 2 * inter, k);
  cpu::SiluMul(gu.data(), out.data(), m, inter);
  return out;
}

void RunFused(int m, int inter, int k, int config, uint64_t seed) {
  const auto x = RandomBf16(static_cast<size_t>(m) * k, seed, -2.f, 2.f);
  const auto w = RandomBf16(static_cast<size_t>(2 * inter) * k, seed + 1, -0.1f, 0.1f);
  OpCase c;
  c.op = "GemmSwiglu";
  c.shape = "m=" + std::to_string(m) + " inter=" + std::to_string(inter) +
            " k=" + std::to_string(k) + " " + GemmSwigluConfigName(config);
  OpOutput o;
  o.rows = m, o.cols = inter, o.tol = kTol;
  c.outputs = {o};
  c.gpu = [=](const std::vector<void*>& out) -> Status {
    PETAL_ASSIGN_OR_RETURN(auto d_x, UploadBf16(x));
    PETAL_ASSIGN_OR_RETURN(auto d_w, UploadBf16(w));
    DeviceBuffer<bf16> d_wi;
    PETAL_RETURN_IF_ERROR(d_wi.Allocate(w.size()));
    PETAL_RETURN_IF_ERROR(LaunchInterleaveGateUp({d_w.get(), d_wi.get(), inter, k}, 0));
    PETAL_RETURN_IF_ERROR(LaunchGemmSwiglu(
        {d_x.get(), d_wi.get(), static_cast<bf16*>(out[0]), m, inter, k, config}, 0));
    return SyncDevice();
  };
  c.reference = [=] { return std::vector<std::vector<float>>{Reference(x, w, m, inter, k)}; };
  EXPECT_TRUE(RunOpCase(c));
}

TEST_F(GemmFusedGpuTest, MatchesGemmThenSiluMul) {
  uint64_t seed = 12000;
  for (int config = 0; config < GemmSwigluConfigs(); ++config) {
    for (int m : {1, 77, 128, 1000}) {
      RunFused(m, 3072, 1024, config, seed += 2);  // Qwen3 0.6B
      RunFused(m, 40, 64, config, seed += 2);      // N = 80: a partial tile in N
    }
    RunFused(4096, 3072, 1024, config, seed += 2);
    RunFused(9000, 3072, 1024, config, seed += 2);  // >= 8192 tokens: the swizzled tile order
    RunFused(300, 9728, 2560, config, seed += 2);   // Qwen3 4B
  }
}

TEST_F(GemmFusedGpuTest, SiluMulInterleavedMatchesSiluMul) {
  uint64_t seed = 12500;
  for (int inter : {2, 98, 3072}) {
    for (int rows : {1, 77, 1000}) {
      const auto gu = RandomBf16(static_cast<size_t>(rows) * 2 * inter, seed++, -8.f, 8.f);
      std::vector<float> il(gu.size());  // interleaved copy of each row
      for (int r = 0; r < rows; ++r)
        for (int i = 0; i < inter; ++i) {
          il[(size_t)r * 2 * inter + 2 * i] = gu[(size_t)r * 2 * inter + i];
          il[(size_t)r * 2 * inter + 2 * i + 1] = gu[(size_t)r * 2 * inter + inter + i];
        }
      OpCase c;
      c.op = "SiluMulInterleaved";
      c.shape = "rows=" + std::to_string(rows) + " inter=" + std::to_string(inter);
      OpOutput o;
      o.rows = rows, o.cols = inter, o.tol = kTol;
      c.outputs = {o};
      c.gpu = [=](const std::vector<void*>& out) -> Status {
        PETAL_ASSIGN_OR_RETURN(auto d_gu, UploadBf16(il));
        PETAL_RETURN_IF_ERROR(
            LaunchSiluMulInterleaved({d_gu.get(), static_cast<bf16*>(out[0]), rows, inter}, 0));
        return SyncDevice();
      };
      c.reference = [=] {
        std::vector<float> ref(static_cast<size_t>(rows) * inter);
        cpu::SiluMul(gu.data(), ref.data(), rows, inter);
        return std::vector<std::vector<float>>{ref};
      };
      EXPECT_TRUE(RunOpCase(c));
    }
  }
}

struct QkvCase {
  int hq, hkv, k;
  bool bias, norm, rope;
};

void RunQkvRope(const QkvCase& c, const std::vector<int>& lens, uint64_t seed, int config = 0) {
  const auto cu = CuSeqlens(lens);
  const int rows = cu.back() + 2, num_seqs = static_cast<int>(lens.size());
  const int n = (c.hq + 2 * c.hkv) * 128;
  const auto x = RandomBf16(static_cast<size_t>(rows) * c.k, seed, -2.f, 2.f);
  const auto w = RandomBf16(static_cast<size_t>(n) * c.k, seed + 1, -0.1f, 0.1f);
  const auto bias = RandomBf16(n, seed + 2, -0.5f, 0.5f);
  const auto qw = RandomBf16(128, seed + 3, 0.5f, 1.5f), kw = RandomBf16(128, seed + 4, 0.5f, 1.5f);
  OpCase oc;
  oc.op = "GemmQkvRope";
  oc.shape = Describe(lens) + " H" + std::to_string(c.hq) + "/" + std::to_string(c.hkv) + " k" +
             std::to_string(c.k) + (c.bias ? " bias" : "") + (c.norm ? " norm" : "") +
             (c.rope ? " rope" : "") + " " + GemmQkvRopeConfigName(config);
  OpOutput o;
  o.rows = rows, o.cols = n, o.tol = kTol;
  oc.outputs = {o};
  oc.gpu = [=](const std::vector<void*>& out) -> Status {
    PETAL_ASSIGN_OR_RETURN(auto d_x, UploadBf16(x));
    PETAL_ASSIGN_OR_RETURN(auto d_w, UploadBf16(w));
    PETAL_ASSIGN_OR_RETURN(auto d_bias, UploadBf16(bias));
    PETAL_ASSIGN_OR_RETURN(auto d_qw, UploadBf16(qw));
    PETAL_ASSIGN_OR_RETURN(auto d_kw, UploadBf16(kw));
    PETAL_ASSIGN_OR_RETURN(auto d_cu, UploadInts(cu));
    DeviceBuffer<int32_t> d_pos;
    PETAL_RETURN_IF_ERROR(d_pos.Allocate(rows));
    PETAL_RETURN_IF_ERROR(LaunchSeqInfo({d_cu.get(), num_seqs, rows, nullptr, d_pos.get()}, 0));
    const auto table = RopeTable(rows, 128, 1e6);
    DeviceBuffer<float2> d_table;
    PETAL_RETURN_IF_ERROR(d_table.Allocate(table.size()));
    PETAL_RETURN_IF_ERROR(d_table.CopyFromHost(table.data(), table.size()));
    GemmQkvRopeParams p;
    p.x = d_x.get(), p.w = d_w.get(), p.bias = c.bias ? d_bias.get() : nullptr;
    p.out = static_cast<bf16*>(out[0]);
    p.m = rows, p.k = c.k, p.num_q_heads = c.hq, p.num_kv_heads = c.hkv;
    p.q_norm_weight = c.norm ? d_qw.get() : nullptr;
    p.k_norm_weight = c.norm ? d_kw.get() : nullptr;
    p.positions = c.rope ? d_pos.get() : nullptr;
    p.rope_table = d_table.get(), p.rope_table_rows = rows;
    p.config = config;
    PETAL_RETURN_IF_ERROR(LaunchGemmQkvRope(p, 0));
    return SyncDevice();
  };
  oc.reference = [=] {
    std::vector<int32_t> positions(rows);
    cpu::SeqInfo(cu.data(), num_seqs, rows, nullptr, positions.data());
    std::vector<float> ref(static_cast<size_t>(rows) * n);
    cpu::Gemm(x.data(), w.data(), c.bias ? bias.data() : nullptr, ref.data(), rows, n, c.k);
    cpu::QkNormRope(ref.data(), rows, n, c.hq, c.hkv, 128, c.norm ? qw.data() : nullptr,
                    c.norm ? kw.data() : nullptr, 1e-6f, c.rope ? positions.data() : nullptr, 1e6);
    return std::vector<std::vector<float>>{ref};
  };
  EXPECT_TRUE(RunOpCase(oc));
}

TEST_F(GemmFusedGpuTest, QkvRopeMatchesGemmThenQkNormRope) {
  const QkvCase cases[] = {
      {16, 8, 1024, false, true, true},  // Qwen3 0.6B
      {32, 8, 2560, false, true, true},  // Qwen3 4B
      {16, 8, 1024, true, true, true},   // with a QKV bias
      {2, 1, 64, true, false, true},     // rotary only
      {2, 1, 256, false, true, false},   // norm only
  };
  uint64_t seed = 13000;
  for (const QkvCase& c : cases)
    for (const auto& lens : RaggedCases()) {
      ASSERT_NO_FATAL_FAILURE(RunQkvRope(c, lens, seed));
      seed += 5;
    }
  ASSERT_NO_FATAL_FAILURE(RunQkvRope(cases[0], {1000, 7, 3000}, 13900));
  for (int config = 1; config < GemmQkvRopeConfigs(); ++config)
    for (const QkvCase& c : {cases[1], cases[2], cases[3]})
      for (const std::vector<int>& lens : {std::vector<int>{1}, {77, 0, 300}, {1000, 7, 3000}})
        ASSERT_NO_FATAL_FAILURE(RunQkvRope(c, lens, seed += 5, config));
  // >= 8192 tokens: the swizzled tile order (gemm_fused.cc, SetOrder), every configuration.
  for (int config = 0; config < GemmQkvRopeConfigs(); ++config)
    ASSERT_NO_FATAL_FAILURE(RunQkvRope(cases[0], {5000, 4100}, seed += 5, config));
}

TEST_F(GemmFusedGpuTest, InterleaveRejectsBadArguments) {
  DeviceBuffer<bf16> a, b;
  ASSERT_OK(a.Allocate(64 * 16));
  ASSERT_OK(b.Allocate(64 * 16));
  EXPECT_FALSE(LaunchInterleaveGateUp({a.get(), a.get(), 32, 16}, 0).ok());  // aliasing
  EXPECT_FALSE(LaunchInterleaveGateUp({a.get(), b.get(), 32, 12}, 0).ok());  // k % 8
  EXPECT_FALSE(LaunchGemmSwiglu({a.get(), b.get(), b.get(), 4, 4, 12, 0}, 0).ok());
  EXPECT_FALSE(LaunchGemmSwiglu({a.get(), b.get(), b.get(), 4, 8, 16, 99}, 0).ok());
}

TEST_F(GemmFusedGpuTest, TimingFusedVsGemmThenSiluMul) {
  auto gemm_or = Gemm::Create();
  ASSERT_OK(gemm_or.status());
  Gemm& gemm = **gemm_or;
  struct Shape {
    const char* name;
    int inter, k;
  };
  for (const Shape s : {Shape{"q0.6b", 3072, 1024}, Shape{"q4b", 9728, 2560}}) {
    for (int m : {128, 512, 4096, 18432, 32768}) {
      const int64_t gu_n = static_cast<int64_t>(m) * 2 * s.inter;
      DeviceBuffer<bf16> x, w, gu, act;
      ASSERT_OK(x.Allocate(static_cast<size_t>(m) * s.k));
      ASSERT_OK(w.Allocate(static_cast<size_t>(2 * s.inter) * s.k));
      ASSERT_OK(gu.Allocate(gu_n));
      ASSERT_OK(act.Allocate(static_cast<size_t>(m) * s.inter));
      cudaMemset(x.get(), 0x3c, static_cast<size_t>(m) * s.k * 2);  // ~0.01: finite, not zero
      cudaMemset(w.get(), 0x3c, static_cast<size_t>(2 * s.inter) * s.k * 2);
      const GemmParams gp{x.get(), w.get(), nullptr, nullptr, gu.get(), m, 2 * s.inter, s.k};
      const double unfused = MedianLaunchMs([&] {
        (void)gemm.Run(gp, 0);
        return LaunchSiluMulInterleaved({gu.get(), act.get(), m, s.inter}, 0);
      });
      const double flops = 2.0 * m * 2 * s.inter * s.k;
      std::string line = std::string(s.name) + " m=" + std::to_string(m) + ": cuBLASLt+SiluMul " +
                         std::to_string(unfused * 1e3) + " us";
      RecordTiming("GemmThenSiluMul", std::string(s.name) + " m=" + std::to_string(m), unfused,
                   flops / unfused * 1e-9, 0);
      for (int config = 0; config < GemmSwigluConfigs(); ++config) {
        const double fused = MedianLaunchMs([&] {
          return LaunchGemmSwiglu({x.get(), w.get(), act.get(), m, s.inter, s.k, config}, 0);
        });
        RecordTiming(
            "GemmSwiglu",
            std::string(s.name) + " m=" + std::to_string(m) + " " + GemmSwigluConfigName(config),
            fused, flops / fused * 1e-9, 0);
        line += ", " + GemmSwigluConfigName(config) + " " + std::to_string(fused * 1e3) + " us";
      }
      std::printf("%s\n", line.c_str());
      ASSERT_OK(SyncDevice());
    }
  }
}

TEST_F(GemmFusedGpuTest, TimingFusedQkvVsGemmThenQkNormRope) {
  auto gemm_or = Gemm::Create();
  ASSERT_OK(gemm_or.status());
  Gemm& gemm = **gemm_or;
  struct Shape {
    const char* name;
    int hq, hkv, k;
  };
  for (const Shape s : {Shape{"q0.6b", 16, 8, 1024}, Shape{"q4b", 32, 8, 2560}}) {
    for (int m : {128, 512, 4096, 18432, 32768}) {
      const int n = (s.hq + 2 * s.hkv) * 128;
      DeviceBuffer<bf16> x, w, qkv, norm;
      DeviceBuffer<int32_t> pos;
      ASSERT_OK(x.Allocate(static_cast<size_t>(m) * s.k));
      ASSERT_OK(w.Allocate(static_cast<size_t>(n) * s.k));
      ASSERT_OK(qkv.Allocate(static_cast<size_t>(m) * n));
      ASSERT_OK(norm.Allocate(128));
      ASSERT_OK(pos.Allocate(m));
      cudaMemset(x.get(), 0x3c, static_cast<size_t>(m) * s.k * 2);
      cudaMemset(w.get(), 0x3c, static_cast<size_t>(n) * s.k * 2);
      cudaMemset(norm.get(), 0x3f, 256);
      cudaMemset(pos.get(), 0, static_cast<size_t>(m) * 4);
      const auto table = RopeTable(512, 128, 1e6);
      DeviceBuffer<float2> d_table;
      ASSERT_OK(d_table.Allocate(table.size()));
      ASSERT_OK(d_table.CopyFromHost(table.data(), table.size()));
      QkNormRopeParams rp;
      rp.qkv = qkv.get(), rp.rows = m, rp.row_stride = n, rp.num_q_heads = s.hq;
      rp.num_kv_heads = s.hkv, rp.head_dim = 128, rp.q_norm_weight = norm.get();
      rp.k_norm_weight = norm.get(), rp.positions = pos.get(), rp.rope_table = d_table.get();
      rp.rope_table_rows = 512;
      const GemmParams gp{x.get(), w.get(), nullptr, nullptr, qkv.get(), m, n, s.k};
      const double unfused = MedianLaunchMs([&] {
        (void)gemm.Run(gp, 0);
        return LaunchQkNormRope(rp, 0);
      });
      GemmQkvRopeParams fp;
      fp.x = x.get(), fp.w = w.get(), fp.out = qkv.get(), fp.m = m, fp.k = s.k;
      fp.num_q_heads = s.hq, fp.num_kv_heads = s.hkv, fp.q_norm_weight = norm.get();
      fp.k_norm_weight = norm.get(), fp.positions = pos.get(), fp.rope_table = d_table.get();
      fp.rope_table_rows = 512;
      const double flops = 2.0 * m * n * s.k;
      const std::string shape = std::string(s.name) + " m=" + std::to_string(m);
      RecordTiming("GemmThenQkNormRope", shape, unfused, flops / unfused * 1e-9, 0);
      std::string line = shape + ": cuBLASLt+QkNormRope " + std::to_string(unfused * 1e3) + " us";
      for (int config = 0; config < GemmQkvRopeConfigs(); ++config) {
        fp.config = config;
        const double fused = MedianLaunchMs([&] { return LaunchGemmQkvRope(fp, 0); });
        RecordTiming("GemmQkvRope", shape + " " + GemmQkvRopeConfigName(config), fused,
                     flops / fused * 1e-9, 0);
        line += ", " + GemmQkvRopeConfigName(config) + " " + std::to_string(fused * 1e3) + " us";
      }
      std::printf("%s\n", line.c_str());
      ASSERT_OK(SyncDevice());
    }
  }
}

}  // namespace
}  // namespace petal::cuda::test
