// Host bfloat16 <-> float conversions, the one copy shared by the CPU references
// (kernels/cpu/reference_ops.h), the CUDA op tests and the attention tests: round to nearest
// even, NaN stays NaN (quietened), as __float2bfloat16_rn. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>

namespace petal::cpu {

inline uint16_t ToBf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float FromBf16Bits(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// f rounded to the nearest bf16 value, as a float.
inline float RoundBf16(float f) { return FromBf16Bits(ToBf16Bits(f)); }

}  // namespace petal::cpu
