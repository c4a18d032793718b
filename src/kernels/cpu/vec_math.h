// exp / erf / GELU / SiLU as straight-line float arithmetic, so that loops over them vectorise
// (libm's expf/erff are scalar calls). Same functions and error bounds as the ones in ops.cc,
// shared by the fast CPU kernels (cpu_linear.cc, cpu_attention.cc, cpu_fused.cc).
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace petal::cpu::vec {

// exp(x), relative error < 2e-7; x is clamped to [-87, 88]. exp(x) = 2^k exp(r), k = round(x /
// ln2), |r| <= ln2 / 2, with a degree-7 Taylor polynomial for exp(r).
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

// erf(x), absolute error < 2e-7 (the fits of ops.cc: erf(x)/x in x^2 below 0.9, erfc(x) e^(x^2)
// in t = 1/(1 + x/2) above).
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
