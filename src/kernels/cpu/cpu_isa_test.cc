// The ISA-dependent CPU paths against the fp32 reference ops (ops.h) on random inputs, under
// whatever PETAL_CPU_ISA cap the test runs with (ctest runs this binary once per level, see
// src/kernels/CMakeLists.txt): a level above this machine's own is skipped with the reason.
//   bf16 Linear: against the fp32 GEMM on bf16-rounded inputs (what the hardware computes, fp32
//   accumulation): |err| <= 2e-4 * (1 + |ref|) (summation order and pairwise products differ);
//   against the fp32 GEMM on the fp32 inputs: per-row cosine >= 0.9999 and max |err| <= 2e-2 *
//   max |ref| (bf16 keeps 8 mantissa bits). Epilogues (bias, GELU, SiLU*up) the same way.
//   bf16 attention: against the fp32 reference attention on bf16-rounded q/k/v (what the kernel
//   multiplies; what is left is the probabilities' bf16 rounding) |err| <= 4e-3 * max |v|, and on
//   the fp32 inputs per-row cosine >= 0.999; where this level has no AVX512-BF16 (or the head
//   size is not a multiple of 32) it must be the fp32 BlockedAttention bit for bit.
//   fp32 attention (AVX-512 tiles at the avx512 levels, AVX2 below): the reference attention
//   within 1e-5 * max |v|. fp32 Linear epilogues (bias, GELU, SiLU*up; an AVX-512 row variant):
//   the reference GEMM + Gelu / SiluMul within 1e-5 * (1 + |ref|).
//   ConvertToBf16: bit for bit as ToBf16Bits (round to nearest even), NaN stays NaN.
//   Caps: each level turns off what lies above it, in this process and in oneDNN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_attention.h"
#include "kernels/cpu/cpu_bf16_gemm.h"
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

std::vector<float> Rounded(std::vector<float> v) {
  for (auto& x : v) x = RoundBf16(x);
  return v;
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

std::string Cap() {
  const char* c = std::getenv("PETAL_CPU_ISA");
  return c && *c ? c : "auto";
}

// Skips when the cap in force names a level this machine does not have.
#define SKIP_IF_CAP_ABOVE_MACHINE()                                                             \
  if (Cap() != "auto" && !IsaLevelAtMost(Cap(), UncappedCpuFeatures())) {                       \
    GTEST_SKIP() << "PETAL_CPU_ISA=" << Cap() << " is above this machine's level ("             \
                 << UncappedCpuFeatures().IsaLevel() << "): its variant was compiled, not run"; \
  }

#define SKIP_WITHOUT_BF16()                       \
  SKIP_IF_CAP_ABOVE_MACHINE();                    \
  if (std::string why; !HaveBf16Gemm(&why)) {     \
    GTEST_SKIP() << "bf16 path skipped: " << why; \
  }

void CheckAgainst(const std::vector<float>& got, const std::vector<float>& exact,
                  const std::vector<float>& fp32, int m, int n) {
  float mx = 0;
  for (float v : fp32) mx = std::max(mx, std::fabs(v));
  for (int i = 0; i < m * n; ++i) {
    ASSERT_NEAR(got[i], exact[i], 2e-4 * (1 + std::fabs(exact[i]))) << i;
    ASSERT_NEAR(got[i], fp32[i], 2e-2 * mx) << i;
  }
  for (int r = 0; r < m; ++r) ASSERT_GE(Cosine(&got[r * n], &fp32[r * n], n), 0.9999) << r;
}

TEST(CpuIsaTest, Bf16LinearTracksFp32) {
  SKIP_WITHOUT_BF16();
  for (auto [m, n, k] : {std::tuple{1, 384, 384}, {37, 96, 80}, {200, 1536, 384}, {5, 64, 1536}}) {
    SCOPED_TRACE(testing::Message() << m << "x" << n << "x" << k);
    auto x = Random(size_t(m) * k, 1 + m), w = Random(size_t(n) * k, 2 + n, 0.05f),
         b = Random(n, 3, 0.5f);
    const auto xr = Rounded(x), wr = Rounded(w);
    std::vector<float> fp32(size_t(m) * n), exact(fp32.size()), got(fp32.size(), NAN);
    Gemm(x.data(), w.data(), b.data(), fp32.data(), m, n, k);
    Gemm(xr.data(), wr.data(), b.data(), exact.data(), m, n, k);
    auto lin = Linear::Pack(w.data(), b.data(), n, k, CpuPrecision::kBf16);
    ASSERT_TRUE(lin.ok()) << lin.status().ToString();
    EXPECT_EQ(lin->precision(), CpuPrecision::kBf16);
    lin->Forward(x.data(), m, got.data());
    CheckAgainst(got, exact, fp32, m, n);
    lin->Forward(x.data(), m, got.data(), Epilogue::kGelu);
    auto g32 = fp32, gex = exact;
    Gelu(g32.data(), m * n);
    Gelu(gex.data(), m * n);
    CheckAgainst(got, gex, g32, m, n);
    std::vector<float> s32(size_t(m) * n / 2), sex(s32.size()), got2(s32.size(), NAN);
    SiluMul(fp32.data(), s32.data(), m, n / 2);
    SiluMul(exact.data(), sex.data(), m, n / 2);
    lin->Forward(x.data(), m, got2.data(), Epilogue::kSiluMul);
    CheckAgainst(got2, sex, s32, m, n / 2);
    // No bias, and run to run bit for bit.
    auto nob = Linear::Pack(w.data(), nullptr, n, k, CpuPrecision::kBf16);
    ASSERT_TRUE(nob.ok());
    std::vector<float> a(size_t(m) * n), c(a.size());
    nob->Forward(x.data(), m, a.data());
    nob->Forward(x.data(), m, c.data());
    EXPECT_EQ(a, c);
    for (int r = 0; r < m; ++r)
      for (int j = 0; j < n; ++j) {
        const float want = exact[r * n + j];
        ASSERT_NEAR(a[r * n + j] + b[j], want, 2e-4 * (1 + std::fabs(want))) << r << "," << j;
      }
  }
}

// The bf16-in / bf16-out entry points give what Forward gives on the same roundings: bf16 input
// from AddLayerNorm's out_bf16 is exactly ConvertToBf16 of its fp32 output, and a bf16 output
// is the fp32 output rounded to bf16 (within one bf16 step: oneDNN may round its fp32 sum
// differently in the last fp32 bit).
TEST(CpuIsaTest, Bf16FusedInputsAndOutputs) {
  SKIP_WITHOUT_BF16();
  const int m = 45, n = 160, k = 96;
  auto x = Random(size_t(m) * k, 21), r = Random(size_t(m) * k, 22), g = Random(k, 23),
       bt = Random(k, 24), w = Random(size_t(n) * k, 25, 0.1f), b = Random(n, 26);
  std::vector<float> ln = x, ln2 = x;
  std::vector<uint16_t> xb(size_t(m) * k), conv(xb.size());
  AddLayerNorm(ln.data(), r.data(), g.data(), bt.data(), 1e-12f, m, k, xb.data());
  AddLayerNorm(ln2.data(), r.data(), g.data(), bt.data(), 1e-12f, m, k);
  EXPECT_EQ(ln, ln2);
  ConvertToBf16(ln.data(), int64_t{m} * k, conv.data());
  EXPECT_EQ(xb, conv);
  auto lin = Linear::Pack(w.data(), b.data(), n, k, CpuPrecision::kBf16);
  ASSERT_TRUE(lin.ok());
  for (Epilogue e : {Epilogue::kNone, Epilogue::kGelu}) {
    std::vector<float> want(size_t(m) * n), got(want.size());
    std::vector<uint16_t> gotb(want.size());
    lin->Forward(ln.data(), m, want.data(), e);
    lin->ForwardBf16(xb.data(), m, got.data(), e);
    EXPECT_EQ(got, want);
    lin->ForwardBf16Out(xb.data(), m, gotb.data(), e);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(FromBf16Bits(gotb[i]), want[i], std::fabs(want[i]) / 128 + 1e-30f) << i;
  }
}

// The norms' ISA variant in force (AVX-512 or AVX2, by the cap) against the reference ops.
TEST(CpuIsaTest, NormsMatchReferenceAtThisLevel) {
  SKIP_IF_CAP_ABOVE_MACHINE();
  for (int dim : {384, 1024, 77}) {
    const int rows = 13;
    auto x = Random(size_t(rows) * dim, 31 + dim), r = Random(x.size(), 32), g = Random(dim, 33),
         bt = Random(dim, 34);
    std::vector<float> sum = x;
    AddInPlace(sum.data(), r.data(), rows * dim);
    std::vector<float> ref(x.size()), got = x;
    LayerNorm(sum.data(), g.data(), bt.data(), 1e-12f, ref.data(), rows, dim);
    AddLayerNorm(got.data(), r.data(), g.data(), bt.data(), 1e-12f, rows, dim);
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], 2e-5 * (1 + std::fabs(ref[i]))) << dim << " " << i;
    std::vector<float> rms_ref(x.size()), rms_got(x.size()), xs = x;
    RmsNorm(sum.data(), g.data(), 1e-6f, rms_ref.data(), rows, dim);
    AddRmsNorm(xs.data(), r.data(), g.data(), 1e-6f, rms_got.data(), rows, dim);
    EXPECT_EQ(xs, sum);
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(rms_got[i], rms_ref[i], 2e-5 * (1 + std::fabs(rms_ref[i]))) << dim << " " << i;
  }
}

TEST(CpuIsaTest, Bf16AttentionTracksFp32) {
  SKIP_IF_CAP_ABOVE_MACHINE();
  std::printf("bf16 attention at this level: %s\n",
              HaveBf16Attention(32) ? "AVX512-BF16 kernel" : "fp32 fallback");
  // Lengths around the 32-query / 128-key blocks (two key blocks at 130 and 160), an empty
  // sequence, GQA, head sizes with and without the bf16 kernel.
  const std::vector<int32_t> cu = {0, 1, 1, 33, 100, 230, 390};
  const int T = cu.back(), S = 6;
  for (int d : {32, 64, 128, 24}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(testing::Message() << "d " << d << (causal ? " causal" : " bidirectional"));
      const int heads = 4, kv = 2, row = (heads + 2 * kv) * d;
      const auto qkv = Random(size_t(T) * row, 51 + d), qkvr = Rounded(qkv);
      const float scale = 2.0f / std::sqrt(float(d));  // peakier softmax than usual
      std::vector<float> ref(size_t(T) * heads * d), exact(ref.size()), got(ref.size(), NAN);
      std::vector<uint16_t> gotb(ref.size());
      auto k_of = [&](const std::vector<float>& x) { return x.data() + heads * d; };
      auto v_of = [&](const std::vector<float>& x) { return x.data() + (heads + kv) * d; };
      Attention(qkv.data(), row, k_of(qkv), row, v_of(qkv), row, ref.data(), cu.data(), S, heads,
                kv, d, causal, scale);
      Attention(qkvr.data(), row, k_of(qkvr), row, v_of(qkvr), row, exact.data(), cu.data(), S,
                heads, kv, d, causal, scale);
      BlockedAttentionBf16(qkv.data(), row, k_of(qkv), row, v_of(qkv), row, got.data(), gotb.data(),
                           cu.data(), S, heads, kv, d, causal, scale);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(gotb[i], ToBf16Bits(got[i])) << i;
      {  // q, k, v given as bf16 bits: the same answer as the fp32 call on those values
        std::vector<uint16_t> bits(qkvr.size()), outb(ref.size());
        for (size_t i = 0; i < bits.size(); ++i) bits[i] = ToBf16Bits(qkvr[i]);
        std::vector<float> want(ref.size(), NAN), got16(ref.size(), NAN);
        BlockedAttentionBf16(qkvr.data(), row, k_of(qkvr), row, v_of(qkvr), row, want.data(),
                             nullptr, cu.data(), S, heads, kv, d, causal, scale);
        BlockedAttentionBf16(bits.data(), row, bits.data() + heads * d, row,
                             bits.data() + (heads + kv) * d, row, got16.data(), outb.data(),
                             cu.data(), S, heads, kv, d, causal, scale);
        ASSERT_EQ(got16, want);
        for (size_t i = 0; i < got16.size(); ++i) ASSERT_EQ(outb[i], ToBf16Bits(got16[i])) << i;
      }
      if (!HaveBf16Attention(d)) {
        std::vector<float> blocked(ref.size());
        BlockedAttention(qkv.data(), row, k_of(qkv), row, v_of(qkv), row, blocked.data(), cu.data(),
                         S, heads, kv, d, causal, scale);
        EXPECT_EQ(got, blocked);
        continue;
      }
      float mx = 0, worst = 0;
      for (int t = 0; t < T; ++t)
        for (int j = 0; j < kv * d; ++j)
          mx = std::max(mx, std::fabs(qkv[t * row + (heads + kv) * d + j]));
      double worst_cos = 1;
      for (size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, std::fabs(got[i] - exact[i]));
        ASSERT_NEAR(got[i], exact[i], 4e-3 * mx) << i;
      }
      for (int r = 0; r < T * heads; ++r)
        worst_cos = std::min(worst_cos, Cosine(&got[size_t(r) * d], &ref[size_t(r) * d], d));
      std::printf(
          "d %d%s: max |err| vs rounded inputs %.2e (max |v| %.2f), worst cosine vs fp32 %.6f\n", d,
          causal ? " causal" : "", worst, mx, worst_cos);
      EXPECT_GE(worst_cos, 0.999);
    }
  }
}

TEST(CpuIsaTest, Fp32AttentionMatchesReferenceAtThisLevel) {
  SKIP_IF_CAP_ABOVE_MACHINE();
  std::printf("fp32 attention tiles at this level: %s\n",
              DetectCpuFeatures().avx512 ? "AVX-512" : "AVX2");
  // Lengths around the 32-query / 128-key blocks and the 32-key tile (an odd panel at 100 and
  // 230), an empty sequence, GQA, head sizes of one, two and three 16-lane columns, and one the
  // tiles do not take (24: scalar).
  const std::vector<int32_t> cu = {0, 1, 1, 33, 100, 230, 390};
  const int T = cu.back(), S = 6;
  for (int d : {16, 32, 48, 64, 24}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(testing::Message() << "d " << d << (causal ? " causal" : " bidirectional"));
      const int heads = 4, kv = 2, row = (heads + 2 * kv) * d;
      const auto qkv = Random(size_t(T) * row, 61 + d);
      const float scale = 2.0f / std::sqrt(float(d));
      std::vector<float> ref(size_t(T) * heads * d), got(ref.size(), NAN);
      const float* k = qkv.data() + heads * d;
      const float* v = qkv.data() + (heads + kv) * d;
      Attention(qkv.data(), row, k, row, v, row, ref.data(), cu.data(), S, heads, kv, d, causal,
                scale);
      BlockedAttention(qkv.data(), row, k, row, v, row, got.data(), cu.data(), S, heads, kv, d,
                       causal, scale);
      float mx = 0;
      for (int t = 0; t < T; ++t)
        for (int j = 0; j < kv * d; ++j) mx = std::max(mx, std::fabs(v[size_t(t) * row + j]));
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-5 * mx) << i;
    }
  }
}

TEST(CpuIsaTest, Fp32EpiloguesMatchReferenceAtThisLevel) {
  SKIP_IF_CAP_ABOVE_MACHINE();
  const int m = 7, k = 40;
  for (int n : {64, 72}) {  // 72: a tail past the 16-lane vectors
    const auto x = Random(size_t(m) * k, 71), w = Random(size_t(n) * k, 72, 0.2f),
               b = Random(n, 73);
    for (bool bias : {true, false}) {
      for (Epilogue e : {Epilogue::kNone, Epilogue::kGelu, Epilogue::kSiluMul}) {
        SCOPED_TRACE(testing::Message()
                     << "n " << n << " bias " << bias << " epilogue " << static_cast<int>(e));
        auto lin = Linear::Pack(w.data(), bias ? b.data() : nullptr, n, k, CpuPrecision::kFp32);
        ASSERT_TRUE(lin.ok()) << lin.status().ToString();
        const int out_n = e == Epilogue::kSiluMul ? n / 2 : n;
        std::vector<float> z(size_t(m) * n), want(size_t(m) * out_n), got(want.size(), NAN);
        Gemm(x.data(), w.data(), bias ? b.data() : nullptr, z.data(), m, n, k);
        if (e == Epilogue::kSiluMul) {
          SiluMul(z.data(), want.data(), m, n / 2);
        } else {
          if (e == Epilogue::kGelu) Gelu(z.data(), static_cast<int64_t>(z.size()));
          want = z;
        }
        lin->Forward(x.data(), m, got.data(), e);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << i;
      }
    }
  }
}

TEST(CpuIsaTest, Bf16UsesAnOptimisedKernel) {
  SKIP_WITHOUT_BF16();
  auto w = Random(384 * 384, 7, 0.05f);
  auto g = Bf16Gemm::Create(w.data(), nullptr, 384, 384);
  ASSERT_TRUE(g.ok());
  for (int m : {1, 128, 4096}) {
    const std::string impl = (*g)->ImplName(m);
    std::printf("bf16 matmul, M = %d: %s\n", m, impl.c_str());
    EXPECT_EQ(impl.find("ref"), std::string::npos) << impl;
  }
}

TEST(CpuIsaTest, Bf16RefusedWithoutHardware) {
  SKIP_IF_CAP_ABOVE_MACHINE();
  if (HaveBf16Gemm()) GTEST_SKIP() << "this CPU (or cap) has bf16; the cap=avx512 run checks this";
  auto w = Random(64 * 64, 8);
  auto lin = Linear::Pack(w.data(), nullptr, 64, 64, CpuPrecision::kBf16);
  ASSERT_FALSE(lin.ok());
  EXPECT_EQ(lin.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(lin.status().message().find("avx512_bf16"), std::string::npos);
}

TEST(CpuIsaTest, ConvertToBf16RoundsToNearestEven) {
  SKIP_IF_CAP_ABOVE_MACHINE();
  // Normal values (the instruction treats denormal inputs as zero), exact halfway cases, large
  // values, infinities and NaN; an odd count exercises the scalar tail.
  std::vector<float> x = Random(70001, 9, 3.0f);
  const float halfway[] = {1.00390625f, 1.01171875f, -2.0078125f, 65504.0f, 3.0e38f};
  for (size_t i = 0; i < std::size(halfway); ++i) x[i * 977] = halfway[i];
  x[5] = std::numeric_limits<float>::infinity();
  x[6] = -std::numeric_limits<float>::infinity();
  x[7] = std::numeric_limits<float>::quiet_NaN();
  std::vector<uint16_t> got(x.size());
  ConvertToBf16(x.data(), static_cast<int64_t>(x.size()), got.data());
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      ASSERT_TRUE(std::isnan(FromBf16Bits(got[i])));
    } else {
      ASSERT_EQ(got[i], ToBf16Bits(x[i])) << i << " " << x[i];
    }
  }
}

TEST(CpuIsaTest, CapLevelsTurnOffWhatIsAbove) {
  CpuFeatures f;
  f.avx2 = f.avx512 = f.avx512_vnni = f.avx512_bf16 = f.amx_bf16 = f.amx_int8 = true;
  EXPECT_EQ(f.IsaLevel(), "amx");
  EXPECT_EQ(CapFeatures(f, "avx512_bf16").IsaLevel(), "avx512_bf16");
  EXPECT_TRUE(CapFeatures(f, "avx512_bf16").avx512_bf16);
  EXPECT_FALSE(CapFeatures(f, "avx512_bf16").amx_bf16);
  EXPECT_EQ(CapFeatures(f, "avx512").IsaLevel(), "avx512");
  EXPECT_FALSE(CapFeatures(f, "avx512").avx512_bf16);
  EXPECT_TRUE(CapFeatures(f, "avx512").avx512_vnni);
  EXPECT_EQ(CapFeatures(f, "avx2").IsaLevel(), "avx2");
  EXPECT_EQ(CapFeatures(f, "generic").IsaLevel(), "generic");
  EXPECT_EQ(CapFeatures(f, "amx").IsaLevel(), "amx");
  EXPECT_TRUE(IsaLevelAtMost("avx2", CapFeatures(f, "avx512")));
  EXPECT_FALSE(IsaLevelAtMost("avx512_bf16", CapFeatures(f, "avx512")));
  EXPECT_FALSE(IsaLevelAtMost("nonsense", f));
  // The cap in force in this process.
  const CpuFeatures& here = DetectCpuFeatures();
  std::printf("PETAL_CPU_ISA=%s: %s\n", Cap().c_str(), here.Describe().c_str());
  SKIP_IF_CAP_ABOVE_MACHINE();
  if (Cap() != "auto") {
    EXPECT_EQ(here.IsaLevel(), Cap());
  }
  EXPECT_EQ(here.IsaLevel(), CapFeatures(UncappedCpuFeatures(), Cap()).IsaLevel());
}

}  // namespace
}  // namespace petal::cpu
