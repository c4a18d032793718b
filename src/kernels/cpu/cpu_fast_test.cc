// The fast CPU kernels (cpu_linear, cpu_attention, cpu_fused, cpu_features) against the fp32
// reference ops of ops.h, on random inputs. Tolerances: fp32 kernels within 1e-5 relative of the
// reference (only summation order differs); int8 GEMMs by per-row cosine >= 0.999.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_attention.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_fused.h"
#include "kernels/cpu/cpu_linear.h"
#include "kernels/cpu/ops.h"

namespace petal::cpu {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

float MaxAbs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

double Cosine(const float* a, const float* b, int n) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < n; ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

TEST(CpuFastTest, BlockedAttentionMatchesReference) {
  // Lengths around the 32-query / 64-key blocks, an empty sequence, GQA, odd head sizes.
  const std::vector<int32_t> cu = {0, 1, 1, 33, 100, 230};
  const int T = cu.back(), S = 5;
  for (int d : {32, 64, 128, 24}) {
    for (bool causal : {false, true}) {
      const int heads = 4, kv = 2, row = (heads + 2 * kv) * d;
      auto qkv = Random(static_cast<size_t>(T) * row, 11 + d);
      std::vector<float> ref(static_cast<size_t>(T) * heads * d), got(ref.size(), NAN);
      const float scale = 1.0f / std::sqrt(float(d)) * 2.0f;  // peakier softmax than usual
      Attention(qkv.data(), row, qkv.data() + heads * d, row, qkv.data() + (heads + kv) * d, row,
                ref.data(), cu.data(), S, heads, kv, d, causal, scale);
      BlockedAttention(qkv.data(), row, qkv.data() + heads * d, row, qkv.data() + (heads + kv) * d,
                       row, got.data(), cu.data(), S, heads, kv, d, causal, scale);
      for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-5) << d << causal << i;
    }
  }
}

TEST(CpuFastTest, Fp32LinearMatchesGemmWithEpilogues) {
  const int m = 37, n = 96, k = 80;
  auto x = Random(m * k, 1), w = Random(n * k, 2, 0.1f), b = Random(n, 3);
  std::vector<float> ref(m * n), got(m * n, NAN);
  Gemm(x.data(), w.data(), b.data(), ref.data(), m, n, k);
  auto lin = Linear::Pack(w.data(), b.data(), n, k, CpuPrecision::kFp32);
  ASSERT_TRUE(lin.ok()) << lin.status().ToString();
  lin->Forward(x.data(), m, got.data());
  for (int i = 0; i < m * n; ++i) ASSERT_NEAR(got[i], ref[i], 1e-5 * (1 + std::fabs(ref[i])));
  lin->Forward(x.data(), m, got.data(), Epilogue::kGelu);
  std::vector<float> gelu = ref;
  Gelu(gelu.data(), m * n);
  for (int i = 0; i < m * n; ++i) ASSERT_NEAR(got[i], gelu[i], 1e-5 * (1 + std::fabs(gelu[i])));
  std::vector<float> silu(m * n / 2), got2(m * n / 2, NAN);
  SiluMul(ref.data(), silu.data(), m, n / 2);
  lin->Forward(x.data(), m, got2.data(), Epilogue::kSiluMul);
  for (int i = 0; i < m * n / 2; ++i)
    ASSERT_NEAR(got2[i], silu[i], 1e-5 * (1 + std::fabs(silu[i])));
}

TEST(CpuFastTest, Int8LinearTracksFp32) {
  // Activations with a few large outliers per row (as transformer activations have).
  const int m = 64, n = 384, k = 384;
  auto x = Random(m * k, 4), w = Random(n * k, 5, 0.05f), b = Random(n, 6, 0.1f);
  for (int r = 0; r < m; ++r) x[r * k + (r * 7) % k] *= 8.0f;
  std::vector<float> ref(m * n), got(m * n, NAN);
  Gemm(x.data(), w.data(), b.data(), ref.data(), m, n, k);
  auto lin = Linear::Pack(w.data(), b.data(), n, k, CpuPrecision::kInt8);
  ASSERT_TRUE(lin.ok());
  lin->Forward(x.data(), m, got.data());
  double worst = 1;
  for (int r = 0; r < m; ++r) worst = std::min(worst, Cosine(&got[r * n], &ref[r * n], n));
  EXPECT_GE(worst, 0.999);
  // The SiLU*up epilogue dequantises both halves before combining them.
  std::vector<float> silu(m * n / 2), got2(m * n / 2);
  SiluMul(ref.data(), silu.data(), m, n / 2);
  lin->Forward(x.data(), m, got2.data(), Epilogue::kSiluMul);
  for (int r = 0; r < m; ++r) EXPECT_GE(Cosine(&got2[r * n / 2], &silu[r * n / 2], n / 2), 0.995);
}

TEST(CpuFastTest, FusedNormsMatchReference) {
  const int rows = 9, dim = 384;
  auto x = Random(rows * dim, 7), r = Random(rows * dim, 8), g = Random(dim, 9),
       bt = Random(dim, 10);
  std::vector<float> ref = x, got = x;
  AddInPlace(ref.data(), r.data(), rows * dim);
  std::vector<float> sum = ref;
  LayerNorm(ref.data(), g.data(), bt.data(), 1e-12f, ref.data(), rows, dim);
  AddLayerNorm(got.data(), r.data(), g.data(), bt.data(), 1e-12f, rows, dim);
  for (int i = 0; i < rows * dim; ++i) ASSERT_NEAR(got[i], ref[i], 2e-5 * MaxAbs(ref));
  std::vector<float> got_x = x, rms_ref(rows * dim), rms_got(rows * dim);
  RmsNorm(sum.data(), g.data(), 1e-6f, rms_ref.data(), rows, dim);
  AddRmsNorm(got_x.data(), r.data(), g.data(), 1e-6f, rms_got.data(), rows, dim);
  for (int i = 0; i < rows * dim; ++i) {
    ASSERT_FLOAT_EQ(got_x[i], sum[i]);
    ASSERT_NEAR(rms_got[i], rms_ref[i], 2e-5 * MaxAbs(rms_ref));
  }
  // Per-head norm and rotary on a fused q|k row layout.
  const int hq = 4, hk = 2, d = 16, row = (hq + hk + hk) * d;
  const std::vector<int32_t> cu = {0, 5, 12};
  auto qkv = Random(12 * row, 11);
  std::vector<float> a = qkv, bq = qkv;
  auto nw = Random(d, 12);
  for (int t = 0; t < 12; ++t) RmsNorm(&a[t * row], nw.data(), 1e-6f, &a[t * row], hq + hk, d);
  HeadRmsNorm(bq.data(), row, 12, hq + hk, d, nw.data(), 1e-6f);
  Rope(a.data(), row, hq + hk, d, cu.data(), 2, 10000.0);
  RopeQK(bq.data(), row, hq, hk, d, cu.data(), 2, RopeTable(7, d, 10000.0));
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(bq[i], a[i], 2e-5 * (1 + std::fabs(a[i])));
}

TEST(CpuFastTest, FeatureCapsDisableWhatTheyCap) {
  CpuFeatures f;
  f.avx2 = f.avx512 = f.avx512_vnni = f.avx512_bf16 = f.amx_bf16 = f.amx_int8 = true;
  EXPECT_EQ(CapFeatures(f, "auto").BestIsa(), "amx");
  EXPECT_EQ(CapFeatures(f, "avx512").BestIsa(), "avx512");
  const CpuFeatures two = CapFeatures(f, "avx2");
  EXPECT_EQ(two.BestIsa(), "avx2");
  EXPECT_FALSE(two.avx512_vnni);
  EXPECT_EQ(CapFeatures(f, "generic").BestIsa(), "generic");
  EXPECT_EQ(CapFeatures(f, "nonsense").BestIsa(), "generic");
  EXPECT_NE(CapFeatures(f, "avx2").Describe().find("PETAL_CPU_ISA=avx2"), std::string::npos);
  // This machine: whatever it has, detection is self-consistent.
  const CpuFeatures& here = DetectCpuFeatures();
  EXPECT_GE(here.usable_cores, 1);
  if (here.avx512) {
    EXPECT_TRUE(here.avx2);
  }
  if (here.amx_int8) {
    EXPECT_TRUE(here.avx512);
  }
}

}  // namespace
}  // namespace petal::cpu
