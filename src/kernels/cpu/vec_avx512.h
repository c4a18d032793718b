// AVX-512 pieces both attention kernels share (cpu_attention_avx512.cc: fp32 tiles;
// cpu_attention_bf16.cc: bf16 tiles): vec::Exp on 16 lanes, and the 8-row register tiling.
// Compiled by function attribute; call only where DetectCpuFeatures() has AVX-512.
// Thread-safety: pure functions.
#pragma once

#include <immintrin.h>

namespace petal::cpu::avx512 {

#define PETAL_AVX512_VEC_INLINE \
  __attribute__((target("avx512f,avx512dq"))) inline __attribute__((always_inline))

// vec::Exp on 16 lanes: the same clamping and polynomial; 2^k by scalef (k is an integer in
// [-126, 127] after the clamps, so it is exact).
PETAL_AVX512_VEC_INLINE __m512 Exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(2.12194440e-4f),
                                   _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x));
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, k);
}

// Rows of the next register tile when `left` query rows remain: 8, but 9-15 split in two
// near-equal tiles so that none is left with 1-3 rows (too few accumulators to hide the latency).
inline int TileRows(int left) {
  return left >= 16 || left == 8 ? 8 : left > 8 ? (left + 1) / 2 : left;
}

// clang-format off
// Runs CALL(R) with R = rows (1..8) as a compile-time constant.
#define PETAL_WITH_ROWS(rows, CALL)                                                      \
  switch (rows) {                                                                        \
    case 1: CALL(1); break; case 2: CALL(2); break; case 3: CALL(3); break;              \
    case 4: CALL(4); break; case 5: CALL(5); break; case 6: CALL(6); break;              \
    case 7: CALL(7); break; default: CALL(8); break;                                     \
  }
// clang-format on

}  // namespace petal::cpu::avx512
