// Tests for the output codec: truncation, normalisation, wire dtypes, pplx-embed quantisers.
#include "wire/codec.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace petal::wire {
namespace {

std::vector<uint8_t> Encode(const std::vector<float>& row, OutputFormat f, float* scale) {
  std::vector<uint8_t> out(BytesPerRow(f));
  EncodeRow(row.data(), f, out.data(), scale);
  return out;
}

TEST(Postprocess, Float32TruncatesWithoutNormalising) {
  std::vector<float> row = {3, 4, 12, 5};
  float scale;
  auto out = Encode(row, {2, false, OutputDType::kFloat32}, &scale);
  ASSERT_EQ(out.size(), 8u);
  float got[2];
  std::memcpy(got, out.data(), 8);
  EXPECT_EQ(got[0], 3);
  EXPECT_EQ(got[1], 4);
}

TEST(Postprocess, MatryoshkaRenormalises) {
  std::vector<float> row = {3, 4, 12, 5};
  float scale;
  auto out = Encode(row, {2, true, OutputDType::kFloat32}, &scale);
  float got[2];
  std::memcpy(got, out.data(), 8);
  EXPECT_FLOAT_EQ(got[0], 0.6f);
  EXPECT_FLOAT_EQ(got[1], 0.8f);
}

TEST(Postprocess, ZeroRowStaysZeroWhenNormalised) {
  std::vector<float> row(5, 0.0f);
  L2Normalize(row.data(), 5);
  for (float v : row) EXPECT_EQ(v, 0.0f);
}

TEST(Postprocess, HalfKnownValues) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // ties to even rounds up to infinity
  EXPECT_EQ(FloatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);             // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);             // tie to even -> 0
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);             // smallest normal
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie, even stays
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, odd rounds up
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
}

TEST(Postprocess, HalfRoundTripIsWithinHalfUlp) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-70000.0f, 70000.0f);
  for (int i = 0; i < 100000; ++i) {
    float x = d(rng) * std::ldexp(1.0f, -std::uniform_int_distribution<int>(0, 30)(rng));
    float y = HalfToFloat(FloatToHalf(x));
    if (std::fabs(x) >= 65520.0f) {
      EXPECT_TRUE(std::isinf(y));
      continue;
    }
    // Relative error <= 2^-11 for normals; absolute <= 2^-25 for subnormals.
    float tol = std::max(std::fabs(x) * std::ldexp(1.0f, -11), std::ldexp(1.0f, -25));
    ASSERT_LE(std::fabs(x - y), tol) << x;
  }
}
// The bulk conversions (F16C on this CPU when it has it) give the scalar functions' bits for
// every length (the 8-wide body and the scalar tail), across normals, subnormals, ties,
// overflow, infinities and signed zeros; NaN stays NaN.
TEST(Postprocess, BulkHalvesMatchScalar) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(-70000.0f, 70000.0f);
  std::vector<float> x;
  for (int i = 0; i < 4000; ++i) {
    x.push_back(d(rng) * std::ldexp(1.0f, -std::uniform_int_distribution<int>(0, 40)(rng)));
  }
  for (float s :
       {0.0f, -0.0f, 65504.0f, 65520.0f, -65520.0f, 1e10f, std::ldexp(1.0f, -24),
        std::ldexp(1.0f, -25), 3 * std::ldexp(1.0f, -25), 1.0f + std::ldexp(1.0f, -11),
        1.0f + 3 * std::ldexp(1.0f, -11), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    x.insert(x.begin() + static_cast<long>(rng() % x.size()), s);
  }
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, x.size()}) {
    std::vector<uint8_t> h(2 * n + 1, 0xAB);  // poisoned, one byte past the end
    FloatsToHalves(x.data(), n, h.data());
    EXPECT_EQ(h[2 * n], 0xAB) << "wrote past " << n << " halves";
    std::vector<float> back(n + 1, -1.0f);
    HalvesToFloats(h.data(), n, back.data());
    EXPECT_EQ(back[n], -1.0f);
    for (size_t i = 0; i < n; ++i) {
      uint16_t got;
      std::memcpy(&got, h.data() + 2 * i, 2);
      if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(HalfToFloat(got))) << i;
        EXPECT_TRUE(std::isnan(back[i])) << i;
        continue;
      }
      ASSERT_EQ(got, FloatToHalf(x[i])) << "n=" << n << " i=" << i << " x=" << x[i];
      ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), std::bit_cast<uint32_t>(HalfToFloat(got))) << i;
    }
  }
}

TEST(Postprocess, Int8UsesPerRowScale) {
  std::vector<float> row = {0.5f, -1.0f, 0.25f, 0.0f};
  float scale;
  auto out = Encode(row, {4, false, OutputDType::kInt8}, &scale);
  EXPECT_FLOAT_EQ(scale, 1.0f / 127);
  EXPECT_EQ(static_cast<int8_t>(out[0]), 64);  // 63.5 rounds to even
  EXPECT_EQ(static_cast<int8_t>(out[1]), -127);
  EXPECT_EQ(static_cast<int8_t>(out[2]), 32);  // 31.75
  EXPECT_EQ(static_cast<int8_t>(out[3]), 0);
  std::vector<float> back(4);
  DecodeRow(out.data(), {4, false, OutputDType::kInt8}, scale, back.data());
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(back[i], row[i], scale / 2 + 1e-7f);
}

TEST(Postprocess, Int8AllZeroRow) {
  std::vector<float> row(3, 0.0f);
  float scale;
  auto out = Encode(row, {3, false, OutputDType::kInt8}, &scale);
  EXPECT_EQ(scale, 0.0f);
  for (auto b : out) EXPECT_EQ(b, 0);
}

TEST(Postprocess, UbinaryPacksMsbFirstWithZeroPadding) {
  // Signs: + - + + - - - + | + - (then 6 padding bits)
  std::vector<float> row = {1, -1, 2, 3, -4, 0, -1, 5, 0.1f, -0.1f};
  float scale;
  auto out = Encode(row, {10, false, OutputDType::kUbinary}, &scale);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], 0b10110101);  // 0 counts as positive (pplx-embed's rule, x >= 0)
  EXPECT_EQ(out[1], 0b10000000);
}

TEST(Postprocess, BinaryIsUbinaryMinus128) {
  std::vector<float> row = {1, -1, 2, 3, -4, 0, -1, 5, -1, -1, -1, -1, -1, -1, -1, -1};
  float scale;
  auto u = Encode(row, {16, false, OutputDType::kUbinary}, &scale);
  auto b = Encode(row, {16, false, OutputDType::kBinary}, &scale);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(static_cast<int8_t>(b[i]), static_cast<int>(u[i]) - 128);
  EXPECT_EQ(static_cast<int8_t>(b[1]), -128);  // all-negative byte
  std::vector<float> back(16);
  DecodeRow(b.data(), {16, false, OutputDType::kBinary}, 0, back.data());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(back[i], row[i] >= 0 ? 1.0f : -1.0f) << i;
}

TEST(Postprocess, Int8TanhMatchesPplxQuantiser) {
  std::vector<float> row = {0.0f, 10.0f, -10.0f, 0.5f};
  float scale;
  auto out = Encode(row, {4, false, OutputDType::kInt8Tanh}, &scale);
  EXPECT_EQ(scale, 0.0f);
  EXPECT_EQ(static_cast<int8_t>(out[0]), 0);
  EXPECT_EQ(static_cast<int8_t>(out[1]), 127);
  EXPECT_EQ(static_cast<int8_t>(out[2]), -127);
  EXPECT_EQ(static_cast<int8_t>(out[3]), static_cast<int>(std::nearbyint(std::tanh(0.5f) * 127)));
  std::vector<float> back(4);
  DecodeRow(out.data(), {4, false, OutputDType::kInt8Tanh}, 0, back.data());
  EXPECT_NEAR(back[3], 0.5f, 0.01f);
}

TEST(Postprocess, SizesPerDtype) {
  EXPECT_EQ(BytesPerRow({384, false, OutputDType::kFloat32}), 1536u);
  EXPECT_EQ(BytesPerRow({384, false, OutputDType::kFloat16}), 768u);
  EXPECT_EQ(BytesPerRow({384, false, OutputDType::kInt8}), 384u);
  EXPECT_EQ(BytesPerRow({384, false, OutputDType::kInt8Tanh}), 384u);
  EXPECT_EQ(BytesPerRow({385, false, OutputDType::kBinary}), 49u);
  EXPECT_EQ(ElementsPerRow({385, false, OutputDType::kUbinary}), 49);
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

TEST(Codec, L2NormalizeMatchesDoubleLoop) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.f, 2.f);
  std::vector<float> x(384);
  for (float& v : x) v = d(rng);
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  std::vector<float> y = x;
  L2Normalize(y.data(), static_cast<int>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i] / std::sqrt(ss), 1e-7) << i;
}

TEST(Codec, RenormalizeOnlyTruncatedRowsOfNormalisingModels) {
  EXPECT_TRUE(RenormalizeByDefault(true, 128, 384));
  EXPECT_FALSE(RenormalizeByDefault(true, 384, 384));
  EXPECT_FALSE(RenormalizeByDefault(false, 128, 384));
}

}  // namespace
}  // namespace petal::wire
