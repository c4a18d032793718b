#include "wire/codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace petal::wire {

static_assert(std::endian::native == std::endian::little,
              "wire formats assume a little-endian host");

const char* OutputDTypeName(OutputDType t) {
  switch (t) {
    case OutputDType::kFloat32:
      return "float32";
    case OutputDType::kFloat16:
      return "float16";
    case OutputDType::kInt8:
      return "int8";
    case OutputDType::kBinary:
      return "binary";
    case OutputDType::kUbinary:
      return "ubinary";
    case OutputDType::kInt8Tanh:
      return "int8_tanh";
  }
  return "?";
}

int ElementsPerRow(const OutputFormat& f) {
  if (f.dtype == OutputDType::kBinary || f.dtype == OutputDType::kUbinary) return (f.dims + 7) / 8;
  return f.dims;
}

size_t BytesPerRow(const OutputFormat& f) {
  switch (f.dtype) {
    case OutputDType::kFloat32:
      return static_cast<size_t>(f.dims) * 4;
    case OutputDType::kFloat16:
      return static_cast<size_t>(f.dims) * 2;
    default:
      return static_cast<size_t>(ElementsPerRow(f));
  }
}

void L2Normalize(float* x, int n) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::max(std::sqrt(ss), 1e-12);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(x[i] * inv);
}

void QuantizeInt8Tanh(const float* x, int n, int8_t* out) {
  for (int i = 0; i < n; ++i) {
    // fp32 like the reference (torch.tanh on fp32, times 127, torch.round = half to even).
    const float v = std::nearbyint(std::tanh(x[i]) * 127.0f);
    out[i] = static_cast<int8_t>(std::clamp(v, -128.0f, 127.0f));
  }
}

void QuantizeBinarySign(const float* x, int n, int8_t* out) {
  for (int i = 0; i < n; ++i) out[i] = x[i] >= 0 ? 1 : -1;
}

void PackBinarySign(const float* x, int n, uint8_t* out) {
  std::fill(out, out + (n + 7) / 8, uint8_t{0});
  for (int i = 0; i < n; ++i) {
    if (x[i] >= 0) out[i / 8] |= static_cast<uint8_t>(0x80u >> (i % 8));
  }
}

double CosineSimilarity(const float* a, const float* b, int n) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < n; ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : 0.0;
}

uint16_t FloatToHalf(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u);  // inf, NaN
  if (x >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds past the largest half (65504)
  if (x < 0x38800000u) {
    // Below the smallest normal half (2^-14): a subnormal in units of 2^-24. Scaling by 2^24 is
    // exact in float, and nearbyint rounds half to even in the default rounding mode.
    const float units = std::nearbyint(std::bit_cast<float>(x) * 16777216.0f);
    return sign | static_cast<uint16_t>(units);  // 1024 units is correctly the smallest normal
  }
  uint32_t h = ((((x >> 23) - 127 + 15) << 10) | ((x & 0x7fffffu) >> 13));
  const uint32_t rest = x & 0x1fffu;                         // the 13 dropped mantissa bits
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry correctly bumps the exponent
  return sign | static_cast<uint16_t>(h);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

#if defined(__x86_64__)
namespace {
// F16C converts 8 values per instruction; _MM_FROUND_TO_NEAREST_INT is round half to even, the
// scalar FloatToHalf's rounding. A multi-vector answer's token vectors are ~3M floats.
__attribute__((target("avx,f16c"))) void FloatsToHalvesF16c(const float* x, size_t n,
                                                            uint8_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), h);
  }
  for (; i < n; ++i) {
    const uint16_t h = FloatToHalf(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}
__attribute__((target("avx,f16c"))) void HalvesToFloatsF16c(const uint8_t* in, size_t n,
                                                            float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    out[i] = HalfToFloat(h);
  }
}
// CPUID leaf 1, ECX: bit 28 AVX, bit 29 F16C, bit 27 OSXSAVE; then XCR0 for the AVX state.
// Read directly: clang's __builtin_cpu_supports does not know "f16c".
bool HasF16c() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    constexpr unsigned kBits = (1u << 27) | (1u << 28) | (1u << 29);
    if ((ecx & kBits) != kBits) return false;
    unsigned lo = 0, hi = 0;  // XCR0: the OS saves the SSE and AVX state (bits 1 and 2)
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6u) == 6u;
  }();
  return has;
}
}  // namespace
#endif

void FloatsToHalves(const float* x, size_t n, uint8_t* out) {
#if defined(__x86_64__)
  if (HasF16c()) return FloatsToHalvesF16c(x, n, out);
#endif
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = FloatToHalf(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

void HalvesToFloats(const uint8_t* in, size_t n, float* out) {
#if defined(__x86_64__)
  if (HasF16c()) return HalvesToFloatsF16c(in, n, out);
#endif
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    out[i] = HalfToFloat(h);
  }
}

void EncodeRow(const float* row, const OutputFormat& f, uint8_t* out, float* scale) {
  *scale = 0;
  const int n = f.dims;
  // Only copy when the row must change; float32 without normalisation is a straight memcpy.
  std::vector<float> tmp;
  const float* x = row;
  if (f.normalize) {
    tmp.assign(row, row + n);
    L2Normalize(tmp.data(), n);
    x = tmp.data();
  }
  switch (f.dtype) {
    case OutputDType::kFloat32:
      std::memcpy(out, x, static_cast<size_t>(n) * 4);
      return;
    case OutputDType::kFloat16:
      FloatsToHalves(x, static_cast<size_t>(n), out);
      return;
    case OutputDType::kInt8: {
      // Symmetric per-row scale: uses the full int8 range whatever the row's magnitude (a fixed
      // scale would waste most of it on normalised 1024-d rows, whose entries are ~0.03).
      float absmax = 0;
      for (int i = 0; i < n; ++i) absmax = std::max(absmax, std::fabs(x[i]));
      const float s = absmax / 127.0f;
      *scale = s;
      for (int i = 0; i < n; ++i) {
        const float q = s > 0 ? std::nearbyint(x[i] / s) : 0.0f;
        out[i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f)));
      }
      return;
    }
    case OutputDType::kInt8Tanh:
      QuantizeInt8Tanh(x, n, reinterpret_cast<int8_t*>(out));
      return;
    case OutputDType::kBinary:
    case OutputDType::kUbinary:
      PackBinarySign(x, n, out);
      // Flipping the top bit is the same as subtracting 128 and reading the byte as int8.
      if (f.dtype == OutputDType::kBinary) {
        for (int b = 0; b < (n + 7) / 8; ++b) out[b] ^= 0x80;
      }
      return;
  }
}

void DecodeRow(const uint8_t* in, const OutputFormat& f, float scale, float* out) {
  const int n = f.dims;
  switch (f.dtype) {
    case OutputDType::kFloat32:
      std::memcpy(out, in, static_cast<size_t>(n) * 4);
      return;
    case OutputDType::kFloat16:
      HalvesToFloats(in, static_cast<size_t>(n), out);
      return;
    case OutputDType::kInt8:
      for (int i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<int8_t>(in[i])) * scale;
      return;
    case OutputDType::kInt8Tanh:
      for (int i = 0; i < n; ++i) {
        // +-127 maps to +-1, where atanh is infinite; clamp to keep the decode finite.
        const float t =
            std::clamp(static_cast<float>(static_cast<int8_t>(in[i])) / 127.0f, -0.999f, 0.999f);
        out[i] = std::atanh(t);
      }
      return;
    case OutputDType::kBinary:
    case OutputDType::kUbinary: {
      const uint8_t offset = f.dtype == OutputDType::kBinary ? 0x80 : 0x00;
      for (int i = 0; i < n; ++i) {
        const uint8_t byte = in[i / 8] ^ offset;
        out[i] = (byte & (0x80u >> (i % 8))) ? 1.0f : -1.0f;
      }
      return;
    }
  }
}

double ScoreFromLogits(const float* logits, int n, bool sigmoid) {
  const double x = n == 2 ? double{logits[0]} - double{logits[1]} : double{logits[0]};
  if (!sigmoid) return x;
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

void ClassProbabilities(const float* logits, int n, bool sigmoid, double* out) {
  if (n <= 0) return;
  if (sigmoid) {
    for (int i = 0; i < n; ++i) {
      const double x = logits[i];
      out[i] = x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
    }
    return;
  }
  double top = logits[0];
  for (int i = 1; i < n; ++i) top = std::max(top, double{logits[i]});
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += out[i] = std::exp(double{logits[i]} - top);
  for (int i = 0; i < n; ++i) out[i] /= sum;
}

}  // namespace petal::wire
