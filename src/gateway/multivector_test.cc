// MaxSim (multivector.h) against a float64 brute force, over shapes that cover the 16-vector
// blocks' tails, query rows outside groups of 4 and dimensions below one vector register.
#include "gateway/multivector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace petal::gateway {
namespace {

double BruteMaxSim(const std::vector<float>& q, const std::vector<float>& d, size_t dim) {
  const size_t nq = q.size() / dim, nd = d.size() / dim;
  double total = 0;
  for (size_t i = 0; i < nq; ++i) {
    double best = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < nd; ++j) {
      double dot = 0;
      for (size_t k = 0; k < dim; ++k) dot += double(q[i * dim + k]) * double(d[j * dim + k]);
      best = std::max(best, dot);
    }
    total += best;
  }
  return total;
}

TEST(MaxSim, MatchesFloat64BruteForce) {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  for (size_t dim : {1, 7, 16, 128}) {
    for (size_t nq : {1, 3, 4, 5, 32}) {
      for (size_t nd : {1, 15, 16, 17, 250}) {
        std::vector<float> q(nq * dim), d(nd * dim);
        for (auto& x : q) x = normal(gen);
        for (auto& x : d) x = normal(gen);
        const double want = BruteMaxSim(q, d, dim);
        const double got = MaxSim(q.data(), nq, d.data(), nd, dim);
        // float sums of `dim` products: a few ulps of the magnitudes involved.
        const double tol = 1e-5 * (std::abs(want) + double(nq) * std::sqrt(double(dim)));
        EXPECT_NEAR(got, want, tol) << "dim " << dim << " nq " << nq << " nd " << nd;
      }
    }
  }
}

TEST(MaxSim, NoDocumentVectorsScoresZero) {
  const std::vector<float> q = {1.0f, 2.0f};
  EXPECT_EQ(MaxSim(q.data(), 1, nullptr, 0, 2), 0.0);
}

// All-negative dot products: the maximum is negative, not the zero of a padded lane.
TEST(MaxSim, PaddedLanesNeverWin) {
  const size_t dim = 4, nd = 3;
  const std::vector<float> q = {1, 1, 1, 1};
  std::vector<float> d(nd * dim, -1.0f);
  EXPECT_NEAR(MaxSim(q.data(), 1, d.data(), nd, dim), -4.0, 1e-6);
}

}  // namespace
}  // namespace petal::gateway
