#include "kernels/cpu/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace petal::cpu {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(CpuOpsTest, GemmMatchesNaive) {
  const int m = 7, n = 5, k = 9;
  auto x = Random(m * k, 1), w = Random(n * k, 2), b = Random(n, 3);
  std::vector<float> y(m * n, NAN);
  Gemm(x.data(), w.data(), b.data(), y.data(), m, n, k);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double ref = b[j];
      for (int t = 0; t < k; ++t) ref += double(x[i * k + t]) * w[j * k + t];
      EXPECT_NEAR(y[i * n + j], ref, 1e-4);
    }
}

TEST(CpuOpsTest, RaggedAttentionEqualsPerSequence) {
  const int heads = 4, kv = 2, d = 8;
  const std::vector<int32_t> cu = {0, 3, 3, 10, 11};  // includes an empty sequence
  const int T = cu.back();
  auto q = Random(T * heads * d, 4), k = Random(T * kv * d, 5), v = Random(T * kv * d, 6);
  for (bool causal : {false, true}) {
    std::vector<float> out(T * heads * d, NAN);
    Attention(q.data(), heads * d, k.data(), kv * d, v.data(), kv * d, out.data(), cu.data(), 4,
              heads, kv, d, causal, 0.35f);
    for (int s = 0; s < 4; ++s) {
      const int b = cu[s], len = cu[s + 1] - cu[s];
      if (len == 0) continue;
      const int32_t one[2] = {0, len};
      std::vector<float> alone(len * heads * d, NAN);
      Attention(q.data() + b * heads * d, heads * d, k.data() + b * kv * d, kv * d,
                v.data() + b * kv * d, kv * d, alone.data(), one, 1, heads, kv, d, causal, 0.35f);
      for (int i = 0; i < len * heads * d; ++i) EXPECT_FLOAT_EQ(alone[i], out[b * heads * d + i]);
    }
  }
}

TEST(CpuOpsTest, AttentionMatchesNaive) {
  // Grouped-query heads, strided q/k/v inside one fused buffer, causal and not.
  const int heads = 4, kv = 2, d = 8, row = (heads + 2 * kv) * d;
  const std::vector<int32_t> cu = {0, 5, 6, 19};
  const int T = cu.back();
  auto qkv = Random(T * row, 7);
  const float* q = qkv.data();
  const float* k = q + heads * d;
  const float* v = k + kv * d;
  for (bool causal : {false, true}) {
    std::vector<float> out(T * heads * d, NAN);
    Attention(q, row, k, row, v, row, out.data(), cu.data(), 3, heads, kv, d, causal, 0.3f);
    for (int s = 0; s < 3; ++s) {
      for (int i = cu[s]; i < cu[s + 1]; ++i) {
        for (int h = 0; h < heads; ++h) {
          const int g = h / (heads / kv), jmax = causal ? i + 1 : cu[s + 1];
          std::vector<double> p;
          double mx = -1e300, sum = 0;
          for (int j = cu[s]; j < jmax; ++j) {
            double dot = 0;
            for (int e = 0; e < d; ++e)
              dot += double(q[i * row + h * d + e]) * k[j * row + g * d + e];
            p.push_back(dot * 0.3);
            mx = std::max(mx, p.back());
          }
          for (double& x : p) sum += (x = std::exp(x - mx));
          for (int e = 0; e < d; ++e) {
            double ref = 0;
            for (int j = cu[s]; j < jmax; ++j) ref += p[j - cu[s]] / sum * v[j * row + g * d + e];
            EXPECT_NEAR(out[(i * heads + h) * d + e], ref, 1e-5) << causal << " " << i << " " << h;
          }
        }
      }
    }
  }
}

TEST(CpuOpsTest, GeluMatchesErfDefinition) {
  std::vector<float> x;
  for (double v = -12; v <= 12; v += 1.0 / 1024) x.push_back(static_cast<float>(v));
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e30f, -1e30f}) x.push_back(v);
  std::vector<float> y = x;
  Gelu(y.data(), static_cast<int64_t>(y.size()));
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i], ref = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    const double err = std::abs(y[i] - ref) / std::max(1.0, std::abs(v));
    worst = std::max(worst, err);
    ASSERT_LE(err, 3e-7) << "x = " << v << " gelu = " << y[i] << " ref = " << ref;
  }
  EXPECT_EQ(y[x.size() - 2], 1e30f);  // saturates exactly
  EXPECT_EQ(y[x.size() - 1], -0.0f);
}

TEST(CpuOpsTest, PoolingModes) {
  const int dim = 3;
  const std::vector<float> h = {1, 2, 3, 3, 4, 5, 10, 0, 0};
  const std::vector<int32_t> cu = {0, 2, 2, 3};
  std::vector<float> out(9, NAN);
  Pool(h.data(), cu.data(), 3, dim, Pooling::kMean, false, out.data());
  EXPECT_EQ(out[0], 2);
  EXPECT_EQ(out[2], 4);
  EXPECT_EQ(out[3], 0);  // empty sequence
  EXPECT_EQ(out[6], 10);
  Pool(h.data(), cu.data(), 3, dim, Pooling::kLastToken, true, out.data());
  EXPECT_NEAR(out[0], 3 / std::sqrt(50.0), 1e-6);
  Pool(h.data(), cu.data(), 3, dim, Pooling::kCls, false, out.data());
  EXPECT_EQ(out[1], 2);
}

TEST(CpuOpsTest, RopeRestartsPerSequence) {
  const int heads = 2, d = 8;
  auto x = Random(5 * heads * d, 7);
  auto y = x;
  const int32_t cu[3] = {0, 2, 5};
  Rope(y.data(), heads * d, heads, d, cu, 2, 10000.0);
  for (int i = 0; i < heads * d; ++i) {
    EXPECT_FLOAT_EQ(y[i], x[i]);                                  // position 0 of sequence 0
    EXPECT_FLOAT_EQ(y[2 * heads * d + i], x[2 * heads * d + i]);  // position 0 of sequence 1
  }
  EXPECT_NE(y[heads * d], x[heads * d]);
}

TEST(CpuOpsTest, NormsNormalise) {
  const int rows = 3, dim = 16;
  auto x = Random(rows * dim, 8);
  std::vector<float> g(dim, 1.f), b(dim, 0.f), out(rows * dim);
  LayerNorm(x.data(), g.data(), b.data(), 1e-12f, out.data(), rows, dim);
  double mean = 0, var = 0;
  for (int i = 0; i < dim; ++i) mean += out[i];
  for (int i = 0; i < dim; ++i) var += out[i] * out[i];
  EXPECT_NEAR(mean / dim, 0, 1e-5);
  EXPECT_NEAR(var / dim, 1, 1e-4);
  RmsNorm(x.data(), g.data(), 1e-6f, out.data(), rows, dim);
  double ss = 0;
  for (int i = 0; i < dim; ++i) ss += out[dim + i] * out[dim + i];
  EXPECT_NEAR(ss / dim, 1, 1e-4);
}

}  // namespace
}  // namespace petal::cpu
