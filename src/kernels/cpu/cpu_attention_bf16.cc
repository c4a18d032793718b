// The bf16 variant of the blocked attention (see cpu_attention.h) for CPUs with AVX512-BF16.
// Per work item the keys are rounded to bf16 and packed into panels of 16 keys, each [d / 2, 16]
// pairs of dimensions (a key's dims t, t+1 side by side: one VDPBF16PS lane), and the values into
// pairs of keys, each [d, 2] (keys j, j+1 side by side for each output dim); each query block is
// rounded to bf16 rows. A score tile is R <= 8 queries x 32 keys: per dim pair, 2 panel loads and
// R broadcasts of the query's pair feed 2R VDPBF16PS (16 fp32 accumulators at R = 8). Then the
// online softmax in fp32 on 16 lanes (masked tails), its probabilities rounded to bf16 (and the
// row sums taken of the rounded values), then P.V as R queries x 32 dims per tile over pairs of
// keys, accumulating in fp32. The kernels are compiled for AVX-512 + BF16 by function attribute
// and only called after DetectCpuFeatures() says so; the build's baseline stays x86-64-v3.
// Thread-safety: a pure function over caller buffers (per-thread scratch inside).

// GCC 12 flags its own AVX-512 intrinsics (the _mm512_undefined_* source of an unmasked max or
// extract) as maybe-uninitialized once inlined here: a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/cpu_attention.h"
#include "kernels/cpu/cpu_attention_bf16_pack.h"
#include "kernels/cpu/cpu_bf16_gemm.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_linear.h"
#include "kernels/cpu/vec_avx512.h"
#include "kernels/cpu/vec_math.h"

namespace petal::cpu {
namespace {

using namespace bf16_pack;  // NOLINT: this file's own packing helpers
using avx512::Exp16;
using avx512::TileRows;

constexpr int kBq = 32;   // queries per block (AttentionItems' ranges are multiples of it)
constexpr int kBk = 128;  // keys per online-softmax block
constexpr int kR = 8;     // query rows per register tile
constexpr int kMaxD = 256;
using Bf16Buf = std::vector<uint16_t, Aligned64Allocator<uint16_t>>;

inline int Round32(int n) { return (n + 31) / 32 * 32; }

PETAL_BF16_INLINE __m512bh AsBh(__m512i x) { return reinterpret_cast<__m512bh>(x); }

// A pair of bf16 values (two consecutive uint16) broadcast to all 16 lanes.
PETAL_BF16_INLINE __m512bh PairBroadcast(const uint16_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return AsBh(_mm512_set1_epi32(v));
}

// 32 floats -> 32 bf16 (round to nearest even), stored at out.
PETAL_BF16_INLINE void Store32(const __m512 lo, const __m512 hi, uint16_t* out) {
  _mm512_storeu_si512(out, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
}

// s[r * ls + j] = scale * q_r . k_j for R query rows of qb ([R, d] bf16) and keys j < n32 (a
// multiple of 32) from the panels at kt.
template <int R>
PETAL_BF16_INLINE void ScoreTile(const uint16_t* qb, const uint16_t* kt, int d, int n32,
                                 float scale, float* s, int ls) {
  const __m512 sc = _mm512_set1_ps(scale);
  for (int j0 = 0; j0 < n32; j0 += 32) {
    __m512 a[R][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) a[r][0] = a[r][1] = _mm512_setzero_ps();
    const uint16_t* p0 = kt + static_cast<int64_t>(j0) * d;
    const uint16_t* p1 = p0 + 16 * d;
    for (int tp = 0; tp < d / 2; ++tp) {
      const __m512bh b0 = AsBh(_mm512_load_si512(p0 + tp * 32));
      const __m512bh b1 = AsBh(_mm512_load_si512(p1 + tp * 32));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512bh x = PairBroadcast(qb + r * d + 2 * tp);
        a[r][0] = _mm512_dpbf16_ps(a[r][0], x, b0);
        a[r][1] = _mm512_dpbf16_ps(a[r][1], x, b1);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      _mm512_storeu_ps(s + r * ls + j0, _mm512_mul_ps(a[r][0], sc));
      _mm512_storeu_ps(s + r * ls + j0 + 16, _mm512_mul_ps(a[r][1], sc));
    }
  }
}

// o[r][c] = o[r][c] * corr[r] + sum_{j < 2 * npairs} p[r][j] v[j][c] for R rows (p: bf16, row
// stride lp; v: the pair layout above; o: fp32 [R, d]).
template <int R>
PETAL_BF16_INLINE void PvTile(const uint16_t* p, int lp, int npairs, const uint16_t* vp, int d,
                              const float* corr, float* o) {
  for (int c0 = 0; c0 < d; c0 += 32) {
    __m512 a[R][2];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 c = _mm512_set1_ps(corr[r]);
      a[r][0] = _mm512_mul_ps(_mm512_loadu_ps(o + r * d + c0), c);
      a[r][1] = _mm512_mul_ps(_mm512_loadu_ps(o + r * d + c0 + 16), c);
    }
    for (int jp = 0; jp < npairs; ++jp) {
      const uint16_t* vj = vp + static_cast<int64_t>(jp) * 2 * d + 2 * c0;
      const __m512bh b0 = AsBh(_mm512_load_si512(vj)), b1 = AsBh(_mm512_load_si512(vj + 32));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512bh x = PairBroadcast(p + r * lp + 2 * jp);
        a[r][0] = _mm512_dpbf16_ps(a[r][0], x, b0);
        a[r][1] = _mm512_dpbf16_ps(a[r][1], x, b1);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      _mm512_storeu_ps(o + r * d + c0, a[r][0]);
      _mm512_storeu_ps(o + r * d + c0 + 16, a[r][1]);
    }
  }
}

// Queries [q0, q0 + nq) of one head: q (fp32 or bf16 rows, stride q_stride) against the packed
// keys and values; output rows at out / out_bf16 (stride out_stride; either may be null).
template <typename T>
PETAL_BF16_FN void RunItem(const T* q, int q_stride, const uint16_t* kt, const uint16_t* vp,
                           float* out, uint16_t* out_bf16, int out_stride, int q0, int nq, int len,
                           int d, bool causal, float scale, uint16_t* qb, float* sbuf,
                           uint16_t* pbuf, float* acc) {
  float m[kBq], l[kBq], corr[kBq];
  for (int i = 0; i < nq; ++i) {
    m[i] = -INFINITY, l[i] = 0.0f;
    const T* qi = q + static_cast<int64_t>(q0 + i) * q_stride;
    for (int t = 0; t < d; t += 32) Row32(qi + t, qb + i * d + t);
  }
  std::fill(acc, acc + static_cast<size_t>(nq) * d, 0.0f);
  const int kend = causal ? q0 + nq : len;
  for (int kb = 0; kb < kend; kb += kBk) {
    const int nk = std::min(kBk, kend - kb), n32 = Round32(nk);
    for (int i0 = 0, r = 0; i0 < nq; i0 += r) {
      r = TileRows(nq - i0);
      // Causal: this tile's last query sees keys below q0 + i0 + r; the softmax masks the rest.
      const int tn = causal ? std::min(n32, Round32(q0 + i0 + r - kb)) : n32;
      if (tn <= 0) continue;
      const uint16_t* kp = kt + static_cast<int64_t>(kb) * d;
#define PETAL_SCORE(R) ScoreTile<R>(qb + i0 * d, kp, d, tn, scale, sbuf + i0 * kBk, kBk)
      PETAL_WITH_ROWS(r, PETAL_SCORE)
#undef PETAL_SCORE
    }
    for (int i = 0; i < nq; ++i) {
      const float* sr = sbuf + i * kBk;
      uint16_t* pr = pbuf + i * kBk;
      const int jmax = causal ? std::min(nk, q0 + i - kb + 1) : nk;
      if (jmax <= 0) {  // every key of this block is masked for this query
        std::fill(pr, pr + n32, uint16_t{0});
        corr[i] = 1.0f;
        continue;
      }
      __m512 mx = _mm512_set1_ps(m[i]);
      for (int j = 0; j < jmax; j += 16) {
        const __mmask16 live = _cvtu32_mask16(jmax - j >= 16 ? 0xffffu : (1u << (jmax - j)) - 1);
        mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), live, sr + j));
      }
      const float mxs = _mm512_reduce_max_ps(mx);
      const __m512 mv = _mm512_set1_ps(mxs);
      // 32 probabilities at a time, rounded to bf16 and summed as rounded (VDPBF16PS against
      // ones: each lane adds its pair).
      const __m512bh ones = AsBh(_mm512_set1_epi16(0x3f80));
      __m512 sum = _mm512_setzero_ps();
      auto probs16 = [&](int j) PETAL_BF16_FN {
        const int left = std::max(0, jmax - j);
        const __mmask16 live = _cvtu32_mask16(left >= 16 ? 0xffffu : (1u << left) - 1);
        return _mm512_maskz_mov_ps(live,
                                   Exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(live, sr + j), mv)));
      };
      for (int j = 0; j < n32; j += 32) {
        const __m512bh eb = _mm512_cvtne2ps_pbh(probs16(j + 16), probs16(j));
        _mm512_storeu_si512(pr + j, reinterpret_cast<__m512i>(eb));
        sum = _mm512_dpbf16_ps(sum, eb, ones);
      }
      corr[i] = vec::Exp(m[i] - mxs);  // 0 on the first block (m = -inf clamps)
      l[i] = l[i] * corr[i] + _mm512_reduce_add_ps(sum);
      m[i] = mxs;
    }
    const uint16_t* vb = vp + static_cast<int64_t>(kb) * d;
    for (int i0 = 0, r = 0; i0 < nq; i0 += r) {
      r = TileRows(nq - i0);
      const int tn = causal ? std::min(nk, q0 + i0 + r - kb) : nk;  // past it P is 0
      if (tn <= 0) continue;  // every row of the tile masked: corr is 1, nothing to add
#define PETAL_PV(R) \
  PvTile<R>(pbuf + i0 * kBk, kBk, (tn + 1) / 2, vb, d, corr + i0, acc + static_cast<size_t>(i0) * d)
      PETAL_WITH_ROWS(r, PETAL_PV)
#undef PETAL_PV
    }
  }
  for (int i = 0; i < nq; ++i) {
    const __m512 inv = _mm512_set1_ps(l[i] > 0 ? 1.0f / l[i] : 0.0f);
    const float* ai = acc + static_cast<size_t>(i) * d;
    const int64_t row = static_cast<int64_t>(q0 + i) * out_stride;
    for (int t = 0; t < d; t += 32) {
      const __m512 lo = _mm512_mul_ps(_mm512_loadu_ps(ai + t), inv);
      const __m512 hi = _mm512_mul_ps(_mm512_loadu_ps(ai + t + 16), inv);
      if (out) {
        _mm512_storeu_ps(out + row + t, lo);
        _mm512_storeu_ps(out + row + t + 16, hi);
      }
      if (out_bf16) Store32(lo, hi, out_bf16 + row + t);
    }
  }
}

}  // namespace

bool HaveBf16Attention(int head_dim) {
  return DetectCpuFeatures().avx512_bf16 && head_dim % 32 == 0 && head_dim > 0 && head_dim <= kMaxD;
}

namespace {

// The parallel driver of both entry points (HaveBf16Attention(head_dim) checked by the caller).
template <typename T>
void RunBf16(const T* q, int q_stride, const T* k, int k_stride, const T* v, int v_stride,
             float* out, uint16_t* out_bf16, const int32_t* cu_seqlens, int num_seqs, int num_heads,
             int num_kv_heads, int d, bool causal, float scale, const int32_t* kv_lens) {
  const int group = num_heads / num_kv_heads, out_stride = num_heads * d;
  const std::vector<AttentionItem> items =
      AttentionItems(cu_seqlens, num_seqs, num_kv_heads, std::max(1, omp_get_max_threads()));
  const int64_t n_items = static_cast<int64_t>(items.size());
#pragma omp parallel
  {
    AlignedFloats sbuf(static_cast<size_t>(kBq) * kBk), acc(static_cast<size_t>(kBq) * d);
    Bf16Buf qb(static_cast<size_t>(kBq) * d), pbuf(static_cast<size_t>(kBq) * kBk), kt, vp;
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < n_items; ++it) {
      const AttentionItem& w = items[it];
      const int begin = cu_seqlens[w.seq], seq_len = cu_seqlens[w.seq + 1] - begin;
      // Keys: the first kv_lens[seq] tokens when given (queries are still all seq_len tokens).
      const int len = kv_lens ? std::min(seq_len, kv_lens[w.seq]) : seq_len;
      const int kend = causal ? w.q1 : len, ld = Round32(kend);
      if (kt.size() < static_cast<size_t>(ld) * d) {
        kt.resize(static_cast<size_t>(ld) * d);
        vp.resize(kt.size());
      }
      PackKeysValues(k + static_cast<int64_t>(begin) * k_stride + w.kv_head * d, k_stride,
                     v + static_cast<int64_t>(begin) * v_stride + w.kv_head * d, v_stride, kend, ld,
                     d, kt.data(), vp.data());
      for (int h = w.kv_head * group; h < (w.kv_head + 1) * group; ++h) {
        const T* qs = q + static_cast<int64_t>(begin) * q_stride + h * d;
        const int64_t o0 = static_cast<int64_t>(begin) * out_stride + h * d;
        for (int q0 = w.q0; q0 < w.q1; q0 += kBq) {
          RunItem(qs, q_stride, kt.data(), vp.data(), out ? out + o0 : nullptr,
                  out_bf16 ? out_bf16 + o0 : nullptr, out_stride, q0, std::min(kBq, w.q1 - q0), len,
                  d, causal, scale, qb.data(), sbuf.data(), pbuf.data(), acc.data());
        }
      }
    }
  }
}

// The fp32 variant, then the bf16 copy if asked for (no AVX512-BF16, or an unsupported head size).
void RunFp32(const float* q, int q_stride, const float* k, int k_stride, const float* v,
             int v_stride, float* out, uint16_t* out_bf16, const int32_t* cu_seqlens, int num_seqs,
             int num_heads, int num_kv_heads, int d, bool causal, float scale,
             const int32_t* kv_lens) {
  const int64_t outs = static_cast<int64_t>(cu_seqlens[num_seqs]) * num_heads * d;
  std::vector<float> tmp;
  float* o = out;
  if (!o) {
    tmp.resize(static_cast<size_t>(outs));
    o = tmp.data();
  }
  BlockedAttention(q, q_stride, k, k_stride, v, v_stride, o, cu_seqlens, num_seqs, num_heads,
                   num_kv_heads, d, causal, scale, kv_lens);
  if (out_bf16) ConvertToBf16(o, outs, out_bf16);
}

}  // namespace

void BlockedAttentionBf16(const float* q, int q_stride, const float* k, int k_stride,
                          const float* v, int v_stride, float* out, uint16_t* out_bf16,
                          const int32_t* cu_seqlens, int num_seqs, int num_heads, int num_kv_heads,
                          int head_dim, bool causal, float scale, const int32_t* kv_lens) {
  auto run = HaveBf16Attention(head_dim) ? RunBf16<float> : RunFp32;
  run(q, q_stride, k, k_stride, v, v_stride, out, out_bf16, cu_seqlens, num_seqs, num_heads,
      num_kv_heads, head_dim, causal, scale, kv_lens);
}

void BlockedAttentionBf16(const uint16_t* q, int q_stride, const uint16_t* k, int k_stride,
                          const uint16_t* v, int v_stride, float* out, uint16_t* out_bf16,
                          const int32_t* cu_seqlens, int num_seqs, int num_heads, int num_kv_heads,
                          int head_dim, bool causal, float scale, const int32_t* kv_lens) {
  if (HaveBf16Attention(head_dim)) {
    RunBf16<uint16_t>(q, q_stride, k, k_stride, v, v_stride, out, out_bf16, cu_seqlens, num_seqs,
                      num_heads, num_kv_heads, head_dim, causal, scale, kv_lens);
    return;
  }
  // The fp32 variant on the inputs widened back to fp32 (exact), each row of q, k and v once.
  const int rows = cu_seqlens[num_seqs], d = head_dim;
  const int qw = num_heads * d, kw = num_kv_heads * d;
  std::vector<float> qf(static_cast<size_t>(rows) * qw), kf(static_cast<size_t>(rows) * kw),
      vf(kf.size());
  auto widen = [rows](const uint16_t* src, int stride, int width, float* dst) {
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < width; ++c)
        dst[int64_t{r} * width + c] = FromBf16Bits(src[int64_t{r} * stride + c]);
    }
  };
  widen(q, q_stride, qw, qf.data());
  widen(k, k_stride, kw, kf.data());
  widen(v, v_stride, kw, vf.data());
  RunFp32(qf.data(), qw, kf.data(), kw, vf.data(), kw, out, out_bf16, cu_seqlens, num_seqs,
          num_heads, num_kv_heads, d, causal, scale, kv_lens);
}

}  // namespace petal::cpu
