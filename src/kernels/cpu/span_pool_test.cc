// PoolSpans against a float64 loop on random hidden states: mean / first / last token over
// random spans (overlapping ones included), with and without normalisation. Tolerance 2e-6
// absolute on O(1) values (fp32 results, float64 reference).
#include "kernels/cpu/span_pool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace petal::cpu {
namespace {

TEST(PoolSpans, MatchesNaiveLoop) {
  std::mt19937 rng(7);
  const int tokens = 97, dim = 48;
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> hidden(static_cast<size_t>(tokens) * dim);
  for (float& x : hidden) x = u(rng);
  std::vector<int32_t> spans;
  for (int i = 0; i < 40; ++i) {
    const int a = static_cast<int>(rng() % tokens);
    const int b = a + 1 + static_cast<int>(rng() % (tokens - a));
    spans.insert(spans.end(), {a, b, static_cast<int32_t>(i % 3) | (i % 2 ? 0x100 : 0)});
  }
  spans.insert(spans.end(), {5, 5, 0x100});  // empty: zeros
  const int n = static_cast<int>(spans.size()) / 3;
  std::vector<float> out(static_cast<size_t>(n) * dim, -9.f);
  PoolSpans(hidden.data(), spans.data(), n, dim, out.data());
  for (int i = 0; i < n; ++i) {
    const int a = spans[3 * i], b = spans[3 * i + 1], mode = spans[3 * i + 2] & 0xff;
    std::vector<double> want(dim, 0.0);
    if (b > a) {
      const int t0 = mode == 2 ? b - 1 : a, t1 = mode == 1 ? a + 1 : b;
      for (int t = t0; t < t1; ++t)
        for (int d = 0; d < dim; ++d) want[d] += hidden[static_cast<size_t>(t) * dim + d];
      for (double& w : want) w /= (t1 - t0);
      if (spans[3 * i + 2] & 0x100) {
        double ss = 0;
        for (double w : want) ss += w * w;
        for (double& w : want) w /= std::sqrt(ss);
      }
    }
    for (int d = 0; d < dim; ++d)
      ASSERT_NEAR(out[static_cast<size_t>(i) * dim + d], want[d], 2e-6) << "span " << i;
  }
}

}  // namespace
}  // namespace petal::cpu
