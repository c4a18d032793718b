// Blocked attention (see cpu_attention.h). Each (sequence, kv head)'s keys are repacked once per
// call into panels of 16 keys, each [d, 16] contiguous (a strided transpose would put a tile's d
// rows in a handful of L1 sets), and its values into contiguous [len, d] rows; a score tile is
// then a small GEMM over one panel: with AVX2, tiles of 6
// queries x 16 keys (12 accumulator registers; per head dimension 2 key loads and 6 query
// broadcasts feed 12 FMAs), then an online softmax over a block of 128 keys, then P.V in tiles of
// 6 queries x 16 output dims; with AVX-512 (run-time dispatch, cpu_attention_avx512.cc), tiles of
// 8 queries x 32 keys and 8 x 32 dims. Other head sizes (or no AVX2) take a scalar path over the
// same transposed keys. Thread-safety: a pure function over caller buffers.
#include "kernels/cpu/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <omp.h>

#include "kernels/cpu/cpu_attention_avx512.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_linear.h"
#include "kernels/cpu/vec_math.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define PETAL_ATTN_AVX2 1
#endif

namespace petal::cpu {
namespace {

constexpr int kBq = 32;   // queries per work item
constexpr int kBk = 128;  // keys per online-softmax block
constexpr int kR = 6;     // query rows per register tile

using Item = AttentionItem;

// One (sequence, kv head)'s keys in panels: k[j][t] at kt[(j / 16) * 16 * d + t * 16 + j % 16]
// (zero past len), and its values at v[j * d + t].
struct KeysT {
  const float* kt;
  int ld;  // len rounded up to 16
};
inline int64_t PanelIndex(int j, int t, int d) {
  return static_cast<int64_t>(j / 16) * 16 * d + t * 16 + j % 16;
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

// s[r * ls + j] = scale * q_r . k_j for R query rows (stride qs) and keys j in [0, n16), n16 a
// multiple of 16; kt points at the block's first key panel.
template <int R>
inline void ScoreRows(const float* q, int qs, const float* kt, int d, int n16, float scale,
                      float* s, int ls) {
  const __m256 sc = _mm256_set1_ps(scale);
  for (int j0 = 0; j0 < n16; j0 += 16) {
    __m256 a[R][2];
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) a[r][0] = a[r][1] = _mm256_setzero_ps();
    const float* panel = kt + static_cast<int64_t>(j0) * d;
    for (int t = 0; t < d; ++t) {
      const __m256 b0 = _mm256_load_ps(panel + t * 16);
      const __m256 b1 = _mm256_load_ps(panel + t * 16 + 8);
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        const __m256 x = _mm256_broadcast_ss(q + static_cast<int64_t>(r) * qs + t);
        a[r][0] = _mm256_fmadd_ps(x, b0, a[r][0]);
        a[r][1] = _mm256_fmadd_ps(x, b1, a[r][1]);
      }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      _mm256_storeu_ps(s + r * ls + j0, _mm256_mul_ps(a[r][0], sc));
      _mm256_storeu_ps(s + r * ls + j0 + 8, _mm256_mul_ps(a[r][1], sc));
    }
  }
}

// o[r * ldo + c] = o * corr[r] + sum_{j < n} p[r * lp + j] v[j][c] for R rows, c < d (d % 16 == 0).
template <int R>
inline void PvRows(const float* p, int lp, int n, const float* v, int vs, int d, const float* corr,
                   float* o, int ldo) {
  for (int c0 = 0; c0 < d; c0 += 16) {
    __m256 a[R][2];
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 c = _mm256_set1_ps(corr[r]);
      a[r][0] = _mm256_mul_ps(_mm256_loadu_ps(o + r * ldo + c0), c);
      a[r][1] = _mm256_mul_ps(_mm256_loadu_ps(o + r * ldo + c0 + 8), c);
    }
    for (int j = 0; j < n; ++j) {
      const float* vj = v + static_cast<int64_t>(j) * vs + c0;
      const __m256 b0 = _mm256_loadu_ps(vj), b1 = _mm256_loadu_ps(vj + 8);
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        const __m256 x = _mm256_broadcast_ss(p + r * lp + j);
        a[r][0] = _mm256_fmadd_ps(x, b0, a[r][0]);
        a[r][1] = _mm256_fmadd_ps(x, b1, a[r][1]);
      }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      _mm256_storeu_ps(o + r * ldo + c0, a[r][0]);
      _mm256_storeu_ps(o + r * ldo + c0 + 8, a[r][1]);
    }
  }
}

// Calls f.template operator()<R>() with R = rows (1..kR) as a compile-time constant.
template <typename F>
inline void WithRows(int rows, F&& f) {
  switch (rows) {
    case 1:
      f.template operator()<1>();
      break;
    case 2:
      f.template operator()<2>();
      break;
    case 3:
      f.template operator()<3>();
      break;
    case 4:
      f.template operator()<4>();
      break;
    case 5:
      f.template operator()<5>();
      break;
    default:
      f.template operator()<6>();
      break;
  }
}

// Rows of the next tile when `left` query rows remain: 6, but 7-9 rows split 4 + 3..5 so that no
// tile is left with 1-3 rows (too few accumulators to hide the FMA latency).
inline int TileRows(int left) { return left >= 10 || left == 6 ? 6 : left > 6 ? 4 : left; }

// One work item with AVX2 tiles (d % 16 == 0): queries [q0, q0 + nq) of one head of one sequence.
void RunItemAvx2(const float* q, int q_stride, KeysT keys, const float* v, int v_stride, float* out,
                 int out_stride, int q0, int nq, int len, int d, bool causal, float scale,
                 float* sbuf, float* acc) {
  float m[kBq], l[kBq], corr[kBq];
  for (int i = 0; i < nq; ++i) m[i] = -INFINITY, l[i] = 0.0f;
  std::fill(acc, acc + static_cast<size_t>(nq) * d, 0.0f);
  const float* qb = q + static_cast<int64_t>(q0) * q_stride;
  const int kend = causal ? q0 + nq : len;
  for (int kb = 0; kb < kend; kb += kBk) {
    const int nk = std::min(kBk, kend - kb), n16 = (nk + 15) / 16 * 16;
    for (int i0 = 0, r = 0; i0 < nq; i0 += r) {
      r = TileRows(nq - i0);
      // Causal: this tile's last query sees keys below q0 + i0 + r; the softmax masks the rest.
      const int tn = causal ? std::min(n16, (q0 + i0 + r - kb + 15) / 16 * 16) : n16;
      if (tn <= 0) continue;
      WithRows(r, [&]<int R>() {
        ScoreRows<R>(qb + static_cast<int64_t>(i0) * q_stride, q_stride,
                     keys.kt + static_cast<int64_t>(kb) * d, d, tn, scale, sbuf + i0 * kBk, kBk);
      });
    }
    for (int i = 0; i < nq; ++i) {
      float* sr = sbuf + i * kBk;
      const int jmax = causal ? std::min(nk, q0 + i - kb + 1) : nk;
      if (jmax <= 0) {  // every key of this block is masked for this query
        std::fill(sr, sr + n16, 0.0f);
        corr[i] = 1.0f;
        continue;
      }
      const int rn = (jmax + 15) / 16 * 16;  // this row's columns, <= n16 (causal rows: fewer)
      for (int j = jmax; j < rn; ++j) sr[j] = -INFINITY;
      __m256 mx0 = _mm256_set1_ps(m[i]), mx1 = mx0;
      for (int j = 0; j < rn; j += 16) {
        mx0 = _mm256_max_ps(mx0, _mm256_loadu_ps(sr + j));
        mx1 = _mm256_max_ps(mx1, _mm256_loadu_ps(sr + j + 8));
      }
      const float mx = HorizontalMax(_mm256_max_ps(mx0, mx1));
      const __m256 mv = _mm256_set1_ps(mx);
      __m256 s0 = _mm256_setzero_ps(), s1 = s0;
      for (int j = 0; j < rn; j += 16) {
        const __m256 e0 = Exp8(_mm256_sub_ps(_mm256_loadu_ps(sr + j), mv));
        const __m256 e1 = Exp8(_mm256_sub_ps(_mm256_loadu_ps(sr + j + 8), mv));
        _mm256_storeu_ps(sr + j, e0);
        _mm256_storeu_ps(sr + j + 8, e1);
        s0 = _mm256_add_ps(s0, e0);
        s1 = _mm256_add_ps(s1, e1);
      }
      float sum = HorizontalSum(_mm256_add_ps(s0, s1));
      for (int j = jmax; j < rn; ++j) sum -= sr[j];  // -inf lanes clamp to e^-87, not 0
      std::fill(sr + jmax, sr + n16, 0.0f);
      corr[i] = vec::Exp(m[i] - mx);  // 0 on the first block (m = -inf clamps)
      l[i] = l[i] * corr[i] + sum;
      m[i] = mx;
    }
    const float* vb = v + static_cast<int64_t>(kb) * v_stride;
    for (int i0 = 0, r = 0; i0 < nq; i0 += r) {
      r = TileRows(nq - i0);
      const int tn = causal ? std::min(nk, q0 + i0 + r - kb) : nk;  // past it P is 0
      if (tn <= 0) continue;  // every row of the tile masked: corr is 1, nothing to add
      WithRows(r, [&]<int R>() {
        PvRows<R>(sbuf + i0 * kBk, kBk, tn, vb, v_stride, d, corr + i0,
                  acc + static_cast<size_t>(i0) * d, d);
      });
    }
  }
  for (int i = 0; i < nq; ++i) {
    const float inv = l[i] > 0 ? 1.0f / l[i] : 0.0f;
    const float* ai = acc + static_cast<size_t>(i) * d;
    float* o = out + static_cast<int64_t>(q0 + i) * out_stride;
    for (int t = 0; t < d; ++t) o[t] = ai[t] * inv;
  }
}
#endif

// The same item in scalar code, any head size.
void RunItemScalar(const float* q, int q_stride, KeysT keys, const float* v, int v_stride,
                   float* out, int out_stride, int q0, int nq, int len, int d, bool causal,
                   float scale, float* sbuf, float* acc) {
  std::fill(acc, acc + static_cast<size_t>(nq) * d, 0.0f);
  const int kend = causal ? q0 + nq : len;
  for (int i = 0; i < nq; ++i) {
    const float* qi = q + static_cast<int64_t>(q0 + i) * q_stride;
    float* ai = acc + static_cast<size_t>(i) * d;
    float m = -INFINITY, l = 0.0f;
    for (int kb = 0; kb < kend; kb += kBk) {
      const int nk = std::min(kBk, kend - kb);
      const int jmax = causal ? std::min(nk, q0 + i - kb + 1) : nk;
      if (jmax <= 0) break;
      float* sr = sbuf;
      std::fill(sr, sr + jmax, 0.0f);
      for (int t = 0; t < d; ++t) {
        const float qt = qi[t];
        for (int j = 0; j < jmax; ++j) sr[j] += qt * keys.kt[PanelIndex(kb + j, t, d)];
      }
      float mx = m;
      for (int j = 0; j < jmax; ++j) mx = std::max(mx, sr[j] *= scale);
      const float corr = vec::Exp(m - mx);
      float sum = 0.0f;
      for (int j = 0; j < jmax; ++j) sum += (sr[j] = vec::Exp(sr[j] - mx));
      l = l * corr + sum;
      m = mx;
      for (int t = 0; t < d; ++t) ai[t] *= corr;
      for (int j = 0; j < jmax; ++j) {
        const float* vj = v + static_cast<int64_t>(kb + j) * v_stride;
        for (int t = 0; t < d; ++t) ai[t] += sr[j] * vj[t];
      }
    }
    const float inv = l > 0 ? 1.0f / l : 0.0f;
    float* o = out + static_cast<int64_t>(q0 + i) * out_stride;
    for (int t = 0; t < d; ++t) o[t] = ai[t] * inv;
  }
  (void)len;
}

}  // namespace

std::vector<AttentionItem> AttentionItems(const int32_t* cu_seqlens, int num_seqs, int num_kv_heads,
                                          int threads) {
  int64_t pairs = 0;
  for (int s = 0; s < num_seqs; ++s) pairs += cu_seqlens[s + 1] > cu_seqlens[s] ? num_kv_heads : 0;
  const int64_t want = pairs > 0 ? (4LL * threads + pairs - 1) / pairs : 1;
  std::vector<AttentionItem> items;
  for (int s = 0; s < num_seqs; ++s) {
    const int len = cu_seqlens[s + 1] - cu_seqlens[s];
    const int blocks = (len + kBq - 1) / kBq;
    const int per = std::max<int>(1, static_cast<int>((blocks + want - 1) / want)) * kBq;
    for (int h = 0; h < num_kv_heads; ++h) {
      for (int q0 = 0; q0 < len; q0 += per) items.push_back({s, h, q0, std::min(len, q0 + per)});
    }
  }
  return items;
}

void BlockedAttention(const float* q, int q_stride, const float* k, int k_stride, const float* v,
                      int v_stride, float* out, const int32_t* cu_seqlens, int num_seqs,
                      int num_heads, int num_kv_heads, int head_dim, bool causal, float scale,
                      const int32_t* kv_lens) {
  const int group = num_heads / num_kv_heads, d = head_dim, out_stride = num_heads * d;
  const std::vector<Item> items =
      AttentionItems(cu_seqlens, num_seqs, num_kv_heads, std::max(1, omp_get_max_threads()));
  const int64_t n_items = static_cast<int64_t>(items.size());
#if PETAL_ATTN_AVX2
  const bool tiles = d % 16 == 0;
#endif
  const bool wide = d % 16 == 0 && DetectCpuFeatures().avx512;
#pragma omp parallel
  {
    AlignedFloats sbuf(static_cast<size_t>(kBq) * kBk), acc(static_cast<size_t>(kBq) * d);
    AlignedFloats kt, vp;
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < n_items; ++it) {
      const Item& w = items[it];
      const int begin = cu_seqlens[w.seq], seq_len = cu_seqlens[w.seq + 1] - begin;
      // Keys: the first kv_lens[seq] tokens when given (queries are still all seq_len tokens).
      const int len = kv_lens ? std::min(seq_len, kv_lens[w.seq]) : seq_len;
      const int kend = causal ? w.q1 : len, ld = (kend + 15) / 16 * 16;
      if (kt.size() < static_cast<size_t>(ld) * d) {
        kt.resize(static_cast<size_t>(ld) * d);
        vp.resize(kt.size());
      }
      for (int j = 0; j < kend; ++j) {
        const float* kj = k + static_cast<int64_t>(begin + j) * k_stride + w.kv_head * d;
        const float* vj = v + static_cast<int64_t>(begin + j) * v_stride + w.kv_head * d;
        float* kp = kt.data() + PanelIndex(j, 0, d);
        float* vr = vp.data() + static_cast<int64_t>(j) * d;
        for (int t = 0; t < d; ++t) {
          kp[t * 16] = kj[t];
          vr[t] = vj[t];
        }
      }
      for (int j = kend; j < ld; ++j) {
        for (int t = 0; t < d; ++t) kt[PanelIndex(j, t, d)] = 0.0f;
      }
      const KeysT keys{kt.data(), ld};
      for (int h = w.kv_head * group; h < (w.kv_head + 1) * group; ++h) {
        const float* qs = q + static_cast<int64_t>(begin) * q_stride + h * d;
        float* os = out + static_cast<int64_t>(begin) * out_stride + h * d;
        for (int q0 = w.q0; q0 < w.q1; q0 += kBq) {
          const int nq = std::min(kBq, w.q1 - q0);
          if (wide) {
            internal::RunItemAvx512(qs, q_stride, keys.kt, vp.data(), d, os, out_stride, q0, nq,
                                    len, d, causal, scale, sbuf.data(), acc.data());
            continue;
          }
#if PETAL_ATTN_AVX2
          if (tiles) {
            RunItemAvx2(qs, q_stride, keys, vp.data(), d, os, out_stride, q0, nq, len, d, causal,
                        scale, sbuf.data(), acc.data());
            continue;
          }
#endif
          RunItemScalar(qs, q_stride, keys, vp.data(), d, os, out_stride, q0, nq, len, d, causal,
                        scale, sbuf.data(), acc.data());
        }
      }
    }
  }
}

}  // namespace petal::cpu
