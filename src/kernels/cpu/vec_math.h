// exp / erf / GELU / SiLU as straight-line float arithmetic, so that loops over them vectorise
// (libm's expf/erff are scalar calls and were a fifth of the BERT profile: GELU and softmax).
// One copy for the fp32 reference ops (ops.cc) and the fast CPU kernels (cpu_linear.cc,
// cpu_attention.cc): both give the same bits for the same input.
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace petal::cpu::vec {

// exp(x), relative error < 2e-7; x is clamped to [-87, 88] (results stay normal floats).
// exp(x) = 2^k exp(r), k = round(x / ln2), |r| <= ln2 / 2, where the degree-7 Taylor polynomial
// of exp(r) is within 4e-9; ln2 is split in two parts (0.693359375 - 2.12194440e-4) so that r
// keeps its low bits.
inline float Exp(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float k = (x * 1.44269504f + kRound) - kRound;
  const float r = (x - k * 0.693359375f) + k * 2.12194440e-4f;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * std::bit_cast<float>((static_cast<int32_t>(k) + 127) << 23);
}

// erf(x), absolute error < 2e-7 (libm erff: 3e-8). Coefficients are least-squares fits made for
// Petal (numpy, float64): below 0.9, erf(x)/x as a polynomial in x^2 (fit error 1.2e-8); above,
// erfc(x) exp(x^2) as a polynomial in t = 1/(1 + x/2) (fit error 6e-9). erf(4) rounds to 1. Both
// branches are computed and one selected: a conditional here stops vectorisation.
inline float Erf(float x) {
  const float a = std::min(std::fabs(x), 4.0f);
  const float z = a * a;
  float s = -6.14408578e-4f;
  s = s * z + 5.02328668e-3f;
  s = s * z + -2.67874002e-2f;
  s = s * z + 1.12824090e-1f;
  s = s * z + -3.76125544e-1f;
  s = s * z + 1.12837911f;
  const float t = 1.0f / (1.0f + 0.5f * a);
  float l = -4.57723327e-2f;
  l = l * t + -8.00087303e-2f;
  l = l * t + 4.31091964e-1f;
  l = l * t + 8.39950591e-2f;
  l = l * t + 3.36927325e-1f;
  l = l * t + 2.72487521e-1f;
  l = l * t + 6.92909292e-4f;
  const float small = s * a, large = 1.0f - Exp(-z) * l;
  return std::copysign(a < 0.9f ? small : large, x);
}

// Exact (erf) GELU.
inline float Gelu(float x) { return 0.5f * x * (1.0f + Erf(x * 0.70710678118654752f)); }

// x * sigmoid(x).
inline float Silu(float x) { return x / (1.0f + Exp(-x)); }

}  // namespace petal::cpu::vec
