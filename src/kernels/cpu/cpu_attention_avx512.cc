// The fp32 attention's AVX-512 work item (see cpu_attention_avx512.h). Score tiles are R <= 8
// queries x 32 keys (two key panels: per head dimension 2 panel loads and R broadcasts feed 2R
// FMAs, 16 accumulators at R = 8), then the online softmax in 16 lanes with masked tails, then
// P.V as R queries x 32 output dims. Same structure and summation order per lane as the AVX2
// tiles in cpu_attention.cc, twice the width.
#include "kernels/cpu/cpu_attention_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/vec_avx512.h"
#include "kernels/cpu/vec_math.h"

// GCC 12 flags its own AVX-512 intrinsics (the _mm512_undefined_* source of an unmasked max or
// extract) as maybe-uninitialized once inlined here: a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace petal::cpu::internal {
namespace {

#define PETAL_AVX512_FN __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
#define PETAL_AVX512_INLINE PETAL_AVX512_FN inline __attribute__((always_inline))

constexpr int kBk = 128;  // keys per online-softmax block (as cpu_attention.cc)

using avx512::Exp16;
using avx512::TileRows;

// Lanes [0, n) of 16 (n clamped to [0, 16]).
PETAL_AVX512_INLINE __mmask16 Live(int n) {
  return _cvtu32_mask16(n >= 16 ? 0xffffu : n <= 0 ? 0u : (1u << n) - 1);
}

// s[r * ls + j] = scale * q_r . k_j for R query rows (stride qs), keys j < n16 (a multiple of 16)
// from the panels at kt: 32 keys per step, a last step of 16 where n16 is odd in panels.
template <int R, int W>  // W: panels per step (2, or 1 for the tail)
PETAL_AVX512_INLINE void ScoreStep(const float* q, int qs, const float* panel, int d, float scale,
                                   float* s, int ls) {
  __m512 a[R][W];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) a[r][w] = _mm512_setzero_ps();
  for (int t = 0; t < d; ++t) {
    __m512 b[W];
    for (int w = 0; w < W; ++w)
      b[w] = _mm512_load_ps(panel + static_cast<int64_t>(w) * 16 * d + t * 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(q[static_cast<int64_t>(r) * qs + t]);
      for (int w = 0; w < W; ++w) a[r][w] = _mm512_fmadd_ps(x, b[w], a[r][w]);
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) _mm512_storeu_ps(s + r * ls + 16 * w, _mm512_mul_ps(a[r][w], sc));
}

template <int R>
PETAL_AVX512_INLINE void ScoreRows(const float* q, int qs, const float* kt, int d, int n16,
                                   float scale, float* s, int ls) {
  int j0 = 0;
  for (; j0 + 32 <= n16; j0 += 32)
    ScoreStep<R, 2>(q, qs, kt + static_cast<int64_t>(j0) * d, d, scale, s + j0, ls);
  if (j0 < n16) ScoreStep<R, 1>(q, qs, kt + static_cast<int64_t>(j0) * d, d, scale, s + j0, ls);
}

// o[r * d + c] = o * corr[r] + sum_{j < n} p[r * lp + j] v[j][c] for R rows and output dims
// [c0, c0 + 16 W).
template <int R, int W>
PETAL_AVX512_INLINE void PvStep(const float* p, int lp, int n, const float* v, int vs, int d,
                                const float* corr, float* o, int c0) {
  __m512 a[R][W];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 c = _mm512_set1_ps(corr[r]);
    for (int w = 0; w < W; ++w)
      a[r][w] = _mm512_mul_ps(_mm512_loadu_ps(o + r * d + c0 + 16 * w), c);
  }
  for (int j = 0; j < n; ++j) {
    const float* vj = v + static_cast<int64_t>(j) * vs + c0;
    __m512 b[W];
    for (int w = 0; w < W; ++w) b[w] = _mm512_loadu_ps(vj + 16 * w);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(p[r * lp + j]);
      for (int w = 0; w < W; ++w) a[r][w] = _mm512_fmadd_ps(x, b[w], a[r][w]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) _mm512_storeu_ps(o + r * d + c0 + 16 * w, a[r][w]);
}

template <int R>
PETAL_AVX512_INLINE void PvRows(const float* p, int lp, int n, const float* v, int vs, int d,
                                const float* corr, float* o) {
  int c0 = 0;
  for (; c0 + 32 <= d; c0 += 32) PvStep<R, 2>(p, lp, n, v, vs, d, corr, o, c0);
  if (c0 < d) PvStep<R, 1>(p, lp, n, v, vs, d, corr, o, c0);
}

}  // namespace

PETAL_AVX512_FN void RunItemAvx512(const float* q, int q_stride, const float* kt, const float* v,
                                   int v_stride, float* out, int out_stride, int q0, int nq,
                                   int len, int d, bool causal, float scale, float* sbuf,
                                   float* acc) {
  float m[32], l[32], corr[32];
  for (int i = 0; i < nq; ++i) m[i] = -INFINITY, l[i] = 0.0f;
  std::fill(acc, acc + static_cast<size_t>(nq) * d, 0.0f);
  const float* qb = q + static_cast<int64_t>(q0) * q_stride;
  const int kend = causal ? q0 + nq : len;
  for (int kb = 0; kb < kend; kb += kBk) {
    const int nk = std::min(kBk, kend - kb), n16 = (nk + 15) / 16 * 16;
    const float* kp = kt + static_cast<int64_t>(kb) * d;
    for (int i0 = 0, r = 0; i0 < nq; i0 += r) {
      r = TileRows(nq - i0);
      // Causal: this tile's last query sees keys below q0 + i0 + r; the softmax masks the rest.
      const int tn = causal ? std::min(n16, (q0 + i0 + r - kb + 15) / 16 * 16) : n16;
      if (tn <= 0) continue;
      const float* qr = qb + static_cast<int64_t>(i0) * q_stride;
#define PETAL_SCORE(R) ScoreRows<R>(qr, q_stride, kp, d, tn, scale, sbuf + i0 * kBk, kBk)
      PETAL_WITH_ROWS(r, PETAL_SCORE)
#undef PETAL_SCORE
    }
    for (int i = 0; i < nq; ++i) {
      float* sr = sbuf + i * kBk;
      const int jmax = causal ? std::min(nk, q0 + i - kb + 1) : nk;
      if (jmax <= 0) {  // every key of this block is masked for this query
        std::fill(sr, sr + n16, 0.0f);
        corr[i] = 1.0f;
        continue;
      }
      __m512 mx = _mm512_set1_ps(m[i]);
      for (int j = 0; j < jmax; j += 16)
        mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, Live(jmax - j), sr + j));
      const float mxs = _mm512_reduce_max_ps(mx);
      const __m512 mv = _mm512_set1_ps(mxs);
      __m512 sum = _mm512_setzero_ps();
      for (int j = 0; j < n16; j += 16) {  // masked keys get probability 0
        const __mmask16 live = Live(jmax - j);
        const __m512 e = _mm512_maskz_mov_ps(
            live, Exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(live, sr + j), mv)));
        _mm512_storeu_ps(sr + j, e);
        sum = _mm512_add_ps(sum, e);
      }
      corr[i] = vec::Exp(m[i] - mxs);  // 0 on the first block (m = -inf clamps)
      l[i] = l[i] * corr[i] + _mm512_reduce_add_ps(sum);
      m[i] = mxs;
    }
    const float* vb = v + static_cast<int64_t>(kb) * v_stride;
    for (int i0 = 0, r = 0; i0 < nq; i0 += r) {
      r = TileRows(nq - i0);
      const int tn = causal ? std::min(nk, q0 + i0 + r - kb) : nk;  // past it P is 0
      if (tn <= 0) continue;  // every row of the tile masked: corr is 1, nothing to add
#define PETAL_PV(R) \
  PvRows<R>(sbuf + i0 * kBk, kBk, tn, vb, v_stride, d, corr + i0, acc + static_cast<size_t>(i0) * d)
      PETAL_WITH_ROWS(r, PETAL_PV)
#undef PETAL_PV
    }
  }
  for (int i = 0; i < nq; ++i) {
    const __m512 inv = _mm512_set1_ps(l[i] > 0 ? 1.0f / l[i] : 0.0f);
    const float* ai = acc + static_cast<size_t>(i) * d;
    float* o = out + static_cast<int64_t>(q0 + i) * out_stride;
    for (int t = 0; t < d; t += 16)
      _mm512_storeu_ps(o + t, _mm512_mul_ps(_mm512_loadu_ps(ai + t), inv));
  }
  (void)len;
}

}  // namespace petal::cpu::internal
