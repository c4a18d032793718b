#include "engine/postprocess.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace petal {
namespace {

TEST(PostprocessTest, TruncateKeepsPrefixDirectionAndUnitNorm) {
  Embeddings e;
  e.rows = 2;
  e.dim = 4;
  e.data = {3, 4, 100, -7, 0, 0, 0, 1};
  ASSERT_TRUE(TruncateAndNormalize(&e, 2).ok());
  ASSERT_EQ(e.dim, 2);
  ASSERT_EQ(e.data.size(), 4u);
  EXPECT_FLOAT_EQ(e.row(0)[0], 0.6f);
  EXPECT_FLOAT_EQ(e.row(0)[1], 0.8f);
  // An all-zero prefix stays zero instead of becoming NaN.
  EXPECT_EQ(e.row(1)[0], 0.0f);
  EXPECT_EQ(e.row(1)[1], 0.0f);
  EXPECT_FALSE(TruncateAndNormalize(&e, 3).ok());
  EXPECT_FALSE(TruncateAndNormalize(&e, 0).ok());
}

TEST(PostprocessTest, Int8TanhMatchesDefinition) {
  const float x[] = {0.0f, 10.0f, -10.0f, 0.5f, -0.5f, 1e-4f, -0.003f};
  int8_t q[7];
  QuantizeInt8Tanh(x, 7, q);
  EXPECT_EQ(q[0], 0);
  EXPECT_EQ(q[1], 127);
  EXPECT_EQ(q[2], -127);  // tanh never reaches -1 in range, so -128 is never produced
  EXPECT_EQ(q[3], 59);    // tanh(0.5) * 127 = 58.71
  EXPECT_EQ(q[4], -59);
  EXPECT_EQ(q[5], 0);
  EXPECT_EQ(q[6], 0);
  // Against a double-precision evaluation on random inputs, away from rounding ties.
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.f, 1.5f);
  for (int i = 0; i < 10000; ++i) {
    float v = d(rng);
    int8_t out;
    QuantizeInt8Tanh(&v, 1, &out);
    const double ref = std::tanh(static_cast<double>(v)) * 127.0;
    if (std::abs(ref - std::floor(ref) - 0.5) < 1e-4) continue;
    EXPECT_EQ(out, static_cast<int>(std::lround(ref))) << v;
  }
}

TEST(PostprocessTest, BinarySignAndPacking) {
  // x = 0 counts as non-negative; packing is MSB-first like numpy.packbits.
  const float x[] = {1, -1, 0, -0.5f, -2, 3, -1, -1, 5, -1};
  int8_t b[10];
  QuantizeBinarySign(x, 10, b);
  const int8_t want[] = {1, -1, 1, -1, -1, 1, -1, -1, 1, -1};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(b[i], want[i]) << i;
  uint8_t packed[2] = {0xff, 0xff};
  PackBinarySign(x, 10, packed);
  EXPECT_EQ(packed[0], 0b10100100);
  EXPECT_EQ(packed[1], 0b10000000);
}

TEST(CosineSimilarityTest, KnownValues) {
  const float a[3] = {1, 0, 0}, b[3] = {1, 1, 0}, z[3] = {0, 0, 0}, c[3] = {-2, 0, 0};
  EXPECT_NEAR(CosineSimilarity(a, b, 3), 1 / std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(CosineSimilarity(a, c, 3), -1.0, 1e-12);
  EXPECT_EQ(CosineSimilarity(a, z, 3), 0.0);
}

}  // namespace
}  // namespace petal
