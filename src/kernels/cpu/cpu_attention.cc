#include "kernels/cpu/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/vec_math.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define PETAL_ATTN_AVX2 1
#endif

namespace petal::cpu {
namespace {

constexpr int kBq = 32;  // queries per work item
constexpr int kBk = 64;  // keys per block: one score row is 8 AVX2 registers

struct Item {
  int seq, head, q0;
};

// out[i, 0:kD) += sum_{j < n} p[j] * v[j * v_stride + 0:kD), for one chunk of at most 64 dims
// kept in registers (kD is a compile-time width; 0 = runtime `d`).
template <int kD>
inline void AccumulatePV(const float* p, int n, const float* v, int v_stride, int d, float* o) {
  if constexpr (kD > 0) {
    for (int c0 = 0; c0 < kD; c0 += 64) {
      constexpr int kW = kD < 64 ? kD : 64;
      float a[kW];
      for (int t = 0; t < kW; ++t) a[t] = o[c0 + t];
      for (int j = 0; j < n; ++j) {
        const float pj = p[j];
        const float* vj = v + static_cast<int64_t>(j) * v_stride + c0;
        for (int t = 0; t < kW; ++t) a[t] += pj * vj[t];
      }
      for (int t = 0; t < kW; ++t) o[c0 + t] = a[t];
    }
  } else {
    for (int j = 0; j < n; ++j) {
      const float pj = p[j];
      const float* vj = v + static_cast<int64_t>(j) * v_stride;
      for (int t = 0; t < d; ++t) o[t] += pj * vj[t];
    }
  }
}

#if PETAL_ATTN_AVX2
// vec::Exp on 8 lanes (same polynomial and clamping).
inline __m256 Exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = _mm256_fmadd_ps(k, _mm256_set1_ps(2.12194440e-4f),
                                   _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x));
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

inline float HorizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

inline float HorizontalSum(__m256 v) {
  __m128 m = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_add_ps(m, _mm_movehl_ps(m, m));
  m = _mm_add_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

// sr[0:64) = scale * q . kt[:, 0:64) with the 64 accumulators in 8 registers; lanes at or past
// jmax become -inf. Returns max(m_prev, max_j sr[j]).
inline float Scores64(const float* qi, const float* kt, int d, float scale, int jmax, float m_prev,
                      float* sr) {
  __m256 a[8];
  for (auto& v : a) v = _mm256_setzero_ps();
  for (int t = 0; t < d; ++t) {
    const __m256 qb = _mm256_set1_ps(qi[t]);
    const float* row = kt + t * kBk;
    for (int u = 0; u < 8; ++u) a[u] = _mm256_fmadd_ps(qb, _mm256_loadu_ps(row + 8 * u), a[u]);
  }
  const __m256 sc = _mm256_set1_ps(scale);
  for (int u = 0; u < 8; ++u) _mm256_storeu_ps(sr + 8 * u, _mm256_mul_ps(a[u], sc));
  for (int j = jmax; j < kBk; ++j) sr[j] = -INFINITY;
  __m256 mx = _mm256_set1_ps(m_prev);
  for (int u = 0; u < 8; ++u) mx = _mm256_max_ps(mx, _mm256_loadu_ps(sr + 8 * u));
  return HorizontalMax(mx);
}

// sr[j] = exp(sr[j] - mx) for j < jmax, 0 past it; returns the sum.
inline float ExpSum64(float* sr, int jmax, float mx) {
  const __m256 m = _mm256_set1_ps(mx);
  __m256 sum = _mm256_setzero_ps();
  const int vecs = (jmax + 7) / 8;
  for (int u = 0; u < vecs; ++u) {
    const __m256 p = Exp8(_mm256_sub_ps(_mm256_loadu_ps(sr + 8 * u), m));
    _mm256_storeu_ps(sr + 8 * u, p);
  }
  for (int j = jmax; j < vecs * 8; ++j) sr[j] = 0.0f;  // -inf lanes clamp to e^-87, not 0
  for (int u = 0; u < vecs; ++u) sum = _mm256_add_ps(sum, _mm256_loadu_ps(sr + 8 * u));
  return HorizontalSum(sum);
}

// o[0:kD) = o * corr + sum_{j < n} p[j] v[j], 64 dims (8 registers) at a time.
template <int kD>
inline void RescaleAccumulate(const float* p, int n, const float* v, int v_stride, float corr,
                              float* o) {
  constexpr int kW = kD < 64 ? kD / 8 : 8;
  const __m256 c = _mm256_set1_ps(corr);
  for (int c0 = 0; c0 < kD; c0 += 8 * kW) {
    __m256 a[kW];
    for (int u = 0; u < kW; ++u) a[u] = _mm256_mul_ps(_mm256_loadu_ps(o + c0 + 8 * u), c);
    for (int j = 0; j < n; ++j) {
      const __m256 pj = _mm256_set1_ps(p[j]);
      const float* vj = v + static_cast<int64_t>(j) * v_stride + c0;
      for (int u = 0; u < kW; ++u) a[u] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 8 * u), a[u]);
    }
    for (int u = 0; u < kW; ++u) _mm256_storeu_ps(o + c0 + 8 * u, a[u]);
  }
}
#endif

// One work item: queries [q0, q0 + nq) of one head of one sequence of `len` tokens. q, k, v
// point at the sequence's first row (head offsets applied); out likewise, with stride out_stride.
template <int kD>
void RunItem(const float* q, int q_stride, const float* k, int k_stride, const float* v,
             int v_stride, float* out, int out_stride, int q0, int nq, int len, int d, bool causal,
             float scale, float* kt, float* acc) {
  if constexpr (kD > 0) d = kD;
  float m[kBq], l[kBq];
  for (int i = 0; i < nq; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }
  std::fill(acc, acc + static_cast<size_t>(nq) * d, 0.0f);
  const int kend = causal ? q0 + nq : len;
  alignas(32) float sr[kBk];
  for (int kb = 0; kb < kend; kb += kBk) {
    const int nk = std::min(kBk, kend - kb);
    // This key block transposed to [d, kBk] (zero-padded): a query's scores are then d
    // multiply-adds over 64 contiguous keys.
    for (int j = 0; j < nk; ++j) {
      const float* kj = k + static_cast<int64_t>(kb + j) * k_stride;
      for (int t = 0; t < d; ++t) kt[t * kBk + j] = kj[t];
    }
    for (int j = nk; j < kBk; ++j) {
      for (int t = 0; t < d; ++t) kt[t * kBk + j] = 0.0f;
    }
    for (int i = 0; i < nq; ++i) {
      const int jmax = causal ? std::min(nk, q0 + i - kb + 1) : nk;
      if (jmax <= 0) continue;
      const float* qi = q + static_cast<int64_t>(q0 + i) * q_stride;
      float* ai = acc + static_cast<size_t>(i) * d;
#if PETAL_ATTN_AVX2
      if constexpr (kD > 0 && kD % 8 == 0) {
        const float mx = Scores64(qi, kt, kD, scale, jmax, m[i], sr);
        const float corr = vec::Exp(m[i] - mx);
        l[i] = l[i] * corr + ExpSum64(sr, jmax, mx);
        m[i] = mx;
        RescaleAccumulate<kD>(sr, jmax, v + static_cast<int64_t>(kb) * v_stride, v_stride, corr,
                              ai);
        continue;
      }
#endif
      for (int j = 0; j < kBk; ++j) sr[j] = 0.0f;
      for (int t = 0; t < d; ++t) {
        const float qt = qi[t];
        const float* row = kt + t * kBk;
        for (int j = 0; j < kBk; ++j) sr[j] += qt * row[j];
      }
      float mx = m[i];
      for (int j = 0; j < jmax; ++j) {
        sr[j] *= scale;
        mx = std::max(mx, sr[j]);
      }
      const float corr = vec::Exp(m[i] - mx);  // 0 on the first block (m = -inf clamps)
      float sum = 0.0f;
      for (int j = 0; j < jmax; ++j) {
        sr[j] = vec::Exp(sr[j] - mx);
        sum += sr[j];
      }
      l[i] = l[i] * corr + sum;
      m[i] = mx;
      if (corr != 1.0f) {
        for (int t = 0; t < d; ++t) ai[t] *= corr;
      }
      AccumulatePV<kD>(sr, jmax, v + static_cast<int64_t>(kb) * v_stride, v_stride, d, ai);
    }
  }
  for (int i = 0; i < nq; ++i) {
    const float inv = l[i] > 0 ? 1.0f / l[i] : 0.0f;
    const float* ai = acc + static_cast<size_t>(i) * d;
    float* o = out + static_cast<int64_t>(q0 + i) * out_stride;
    for (int t = 0; t < d; ++t) o[t] = ai[t] * inv;
  }
}

}  // namespace

void BlockedAttention(const float* q, int q_stride, const float* k, int k_stride, const float* v,
                      int v_stride, float* out, const int32_t* cu_seqlens, int num_seqs,
                      int num_heads, int num_kv_heads, int head_dim, bool causal, float scale) {
  const int group = num_heads / num_kv_heads;
  std::vector<Item> items;
  for (int s = 0; s < num_seqs; ++s) {
    const int len = cu_seqlens[s + 1] - cu_seqlens[s];
    for (int h = 0; h < num_heads; ++h) {
      for (int q0 = 0; q0 < len; q0 += kBq) items.push_back({s, h, q0});
    }
  }
  const int64_t n_items = static_cast<int64_t>(items.size());
  const int out_stride = num_heads * head_dim;
#pragma omp parallel
  {
    std::vector<float> kt(static_cast<size_t>(head_dim) * kBk),
        acc(static_cast<size_t>(kBq) * head_dim);
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < n_items; ++it) {
      const Item& w = items[it];
      const int begin = cu_seqlens[w.seq], len = cu_seqlens[w.seq + 1] - begin;
      const int nq = std::min(kBq, len - w.q0), kvh = w.head / group;
      const float* qs = q + static_cast<int64_t>(begin) * q_stride + w.head * head_dim;
      const float* ks = k + static_cast<int64_t>(begin) * k_stride + kvh * head_dim;
      const float* vs = v + static_cast<int64_t>(begin) * v_stride + kvh * head_dim;
      float* os = out + static_cast<int64_t>(begin) * out_stride + w.head * head_dim;
      switch (head_dim) {
        case 32:
          RunItem<32>(qs, q_stride, ks, k_stride, vs, v_stride, os, out_stride, w.q0, nq, len, 32,
                      causal, scale, kt.data(), acc.data());
          break;
        case 64:
          RunItem<64>(qs, q_stride, ks, k_stride, vs, v_stride, os, out_stride, w.q0, nq, len, 64,
                      causal, scale, kt.data(), acc.data());
          break;
        case 128:
          RunItem<128>(qs, q_stride, ks, k_stride, vs, v_stride, os, out_stride, w.q0, nq, len, 128,
                       causal, scale, kt.data(), acc.data());
          break;
        default:
          RunItem<0>(qs, q_stride, ks, k_stride, vs, v_stride, os, out_stride, w.q0, nq, len,
                     head_dim, causal, scale, kt.data(), acc.data());
          break;
      }
    }
  }
}

}  // namespace petal::cpu
