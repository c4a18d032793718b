// Packing helpers of the bf16 attention (cpu_attention_bf16.cc), kept apart to keep that file
// short: rows of fp32 or bf16 values as bf16 lanes, a 16 x 16 transpose of 32-bit words, and the
// key / value packing of one work item. Compiled by function attribute for AVX-512 + BF16; call
// only after DetectCpuFeatures() says so. Thread-safety: pure functions over caller buffers.
#pragma once

#include <immintrin.h>

#include <cstdint>

#define PETAL_BF16_FN __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))
#define PETAL_BF16_INLINE PETAL_BF16_FN inline __attribute__((always_inline))

namespace petal::cpu::bf16_pack {

// 32 input values at p (fp32 rounded to bf16, or bf16 bits as they are) as 32 bf16 lanes.
PETAL_BF16_INLINE __m512i Bf16x32(const float* p) {
  return reinterpret_cast<__m512i>(
      _mm512_cvtne2ps_pbh(_mm512_loadu_ps(p + 16), _mm512_loadu_ps(p)));
}
PETAL_BF16_INLINE __m512i Bf16x32(const uint16_t* p) { return _mm512_loadu_si512(p); }

template <typename T>
PETAL_BF16_INLINE void Row32(const T* p, uint16_t* out) {
  _mm512_storeu_si512(out, Bf16x32(p));
}

// In place: r[i] lane c <-> r[c] lane i (16 x 16 32-bit words).
PETAL_BF16_INLINE void Transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);      // per 128-bit lane: a0 b0 a1 b1
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);  // a2 b2 a3 b3
  }
  for (int g = 0; g < 4; ++g) {  // rows 4g..4g+3: u[g * 4 + m] holds column 4L + m of them
    u[g * 4 + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[g * 4 + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[g * 4 + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[g * 4 + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  for (int m = 0; m < 4; ++m) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x88);  // lanes 0, 2 of each
    const __m512i w0 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xDD);  // lanes 1, 3
    const __m512i v1 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x88);
    const __m512i w1 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xDD);
    r[m] = _mm512_shuffle_i32x4(v0, v1, 0x88);       // 128-bit lane 0: column m
    r[8 + m] = _mm512_shuffle_i32x4(v0, v1, 0xDD);   // lane 2: column 8 + m
    r[4 + m] = _mm512_shuffle_i32x4(w0, w1, 0x88);   // lane 1: column 4 + m
    r[12 + m] = _mm512_shuffle_i32x4(w0, w1, 0xDD);  // lane 3: column 12 + m
  }
}

// 16 values of row a in lanes 0..15 and 16 of row b in lanes 16..31, as bf16 (a zero row where
// the pointer is null).
PETAL_BF16_INLINE __m512i TwoRows16(const float* a, const float* b) {
  const __m512 fa = a ? _mm512_loadu_ps(a) : _mm512_setzero_ps();
  const __m512 fb = b ? _mm512_loadu_ps(b) : _mm512_setzero_ps();
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(fb, fa));
}
PETAL_BF16_INLINE __m512i TwoRows16(const uint16_t* a, const uint16_t* b) {
  const __m256i ha =
      a ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)) : _mm256_setzero_si256();
  const __m256i hb =
      b ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)) : _mm256_setzero_si256();
  return _mm512_inserti64x4(_mm512_castsi256_si512(ha), hb, 1);
}

// Keys [0, kend) of one kv head into panels (zero up to ld, a multiple of 32): key j's dims t,
// t+1 at kt[(j / 16) * 16 * d + (t / 2) * 32 + (j % 16) * 2 + t % 2]; values as pairs of keys:
// v[j][c] at vp[(j / 2) * 2 * d + c * 2 + j % 2]. T: float, or uint16_t (bf16 bits).
template <typename T>
PETAL_BF16_FN void PackKeysValues(const T* k, int k_stride, const T* v, int v_stride, int kend,
                                  int ld, int d, uint16_t* kt, uint16_t* vp) {
  // Keys: 16 at a time, 32 dims (16 pairs) at a time, one 16 x 16 transpose of dim pairs.
  for (int j0 = 0; j0 < ld; j0 += 16) {
    uint16_t* panel = kt + static_cast<int64_t>(j0) * d;
    for (int t0 = 0; t0 < d; t0 += 32) {
      __m512i r[16];
      for (int i = 0; i < 16; ++i) {
        const int j = j0 + i;
        r[i] = j < kend ? Bf16x32(k + static_cast<int64_t>(j) * k_stride + t0)
                        : _mm512_setzero_si512();
      }
      Transpose16(r);
      for (int i = 0; i < 16; ++i) _mm512_store_si512(panel + (t0 / 2 + i) * 32, r[i]);
    }
  }
  // Interleave two rows' 16 bf16: lanes 0..15 hold row j, 16..31 row j + 1.
  const __m512i inter = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24,
                                         8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int j = 0; j < ld; j += 2) {
    const T* a = v + static_cast<int64_t>(j) * v_stride;
    const T* b = a + v_stride;
    uint16_t* out = vp + static_cast<int64_t>(j) * d;
    for (int c = 0; c < d; c += 16) {
      const __m512i both = TwoRows16(j < kend ? a + c : nullptr, j + 1 < kend ? b + c : nullptr);
      _mm512_store_si512(out + 2 * c, _mm512_permutexvar_epi16(inter, both));
    }
  }
}

}  // namespace petal::cpu::bf16_pack
