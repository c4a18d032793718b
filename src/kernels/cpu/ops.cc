#include "kernels/cpu/ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/vec_math.h"

namespace petal::cpu {

void Gemm(const float* x, const float* w, const float* bias, float* y, int m, int n, int k) {
  if (m == 0 || n == 0) return;
  if (bias) {
    for (int r = 0; r < m; ++r) std::copy(bias, bias + n, y + static_cast<int64_t>(r) * n);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k,
              bias ? 1.0f : 0.0f, y, n);
}

void LayerNorm(const float* x, const float* gamma, const float* beta, float eps, float* out,
               int rows, int dim) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * dim;
    float* o = out + static_cast<int64_t>(r) * dim;
    double mean = 0;
    for (int i = 0; i < dim; ++i) mean += xr[i];
    mean /= dim;
    double var = 0;
    for (int i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= dim;
    float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    float m = static_cast<float>(mean);
    for (int i = 0; i < dim; ++i) o[i] = (xr[i] - m) * inv * gamma[i] + beta[i];
  }
}

void RmsNorm(const float* x, const float* weight, float eps, float* out, int rows, int dim) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * dim;
    float* o = out + static_cast<int64_t>(r) * dim;
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    float inv = static_cast<float>(1.0 / std::sqrt(ss / dim + eps));
    for (int i = 0; i < dim; ++i) o[i] = xr[i] * inv * weight[i];
  }
}

void AddInPlace(float* x, const float* r, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) x[i] += r[i];
}

void Gelu(float* x, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    x[i] = 0.5f * x[i] * (1.0f + vec::Erf(x[i] * 0.70710678118654752f));
}

void SiluMul(const float* gate_up, float* out, int rows, int inter) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const float* g = gate_up + static_cast<int64_t>(r) * 2 * inter;
    const float* u = g + inter;
    float* o = out + static_cast<int64_t>(r) * inter;
    for (int i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

void Rope(float* x, int row_stride, int heads, int head_dim, const int32_t* cu_seqlens,
          int num_seqs, double theta) {
  const int half = head_dim / 2;
  std::vector<double> inv_freq(half);
  for (int j = 0; j < half; ++j) inv_freq[j] = std::pow(theta, -2.0 * j / head_dim);
  for (int s = 0; s < num_seqs; ++s) {
    const int begin = cu_seqlens[s], end = cu_seqlens[s + 1];
#pragma omp parallel for schedule(static)
    for (int t = begin; t < end; ++t) {
      const int pos = t - begin;
      float* row = x + static_cast<int64_t>(t) * row_stride;
      for (int j = 0; j < half; ++j) {
        // Computed in double then rounded, as HF computes cos/sin in fp32 from fp32 inv_freq;
        // the difference is far below the tolerances we test at.
        const double angle = pos * inv_freq[j];
        const float c = static_cast<float>(std::cos(angle)),
                    sn = static_cast<float>(std::sin(angle));
        for (int h = 0; h < heads; ++h) {
          float* v = row + h * head_dim;
          const float a = v[j], b = v[j + half];
          v[j] = a * c - b * sn;
          v[j + half] = b * c + a * sn;
        }
      }
    }
  }
}

namespace {

// o[0:dim) = sum_j p[j] * v[j * v_stride + 0:dim), summed in j order. With the dimension a
// compile-time constant (kDim > 0) the accumulator stays in registers instead of being stored
// and reloaded for every j, which dominated the attention profile.
template <int kDim>
void WeightedRows(const float* p, int n, const float* v, int v_stride, int dim, float* o) {
  if constexpr (kDim > 0) {
    float acc[kDim] = {};
    for (int j = 0; j < n; ++j) {
      const float pj = p[j];
      const float* vj = v + static_cast<int64_t>(j) * v_stride;
      for (int d = 0; d < kDim; ++d) acc[d] += pj * vj[d];
    }
    std::copy(acc, acc + kDim, o);
  } else {
    std::fill(o, o + dim, 0.0f);
    for (int j = 0; j < n; ++j) {
      const float pj = p[j];
      const float* vj = v + static_cast<int64_t>(j) * v_stride;
      for (int d = 0; d < dim; ++d) o[d] += pj * vj[d];
    }
  }
}

}  // namespace

void Attention(const float* q, int q_stride, const float* k, int k_stride, const float* v,
               int v_stride, float* out, const int32_t* cu_seqlens, int num_seqs, int num_heads,
               int num_kv_heads, int head_dim, bool causal, float scale, const int32_t* kv_lens) {
  const int group = num_heads / num_kv_heads;
  const int64_t items = static_cast<int64_t>(num_seqs) * num_heads;
  // One parallel region over every (sequence, head) pair: a region per sequence cost more in
  // fork/join (and idle-thread spinning) than short sequences cost to compute.
#pragma omp parallel
  {
    std::vector<float> kt, scores;
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) {
      const int s = static_cast<int>(item / num_heads), h = static_cast<int>(item % num_heads);
      const int kvh = h / group;
      const int begin = cu_seqlens[s], len = cu_seqlens[s + 1] - cu_seqlens[s];
      if (len <= 0) continue;
      // This head's keys transposed to [head_dim, len]: a query's scores then accumulate as
      // head_dim multiply-adds over contiguous j, which vectorise, where a dot product per key
      // does not (float reductions may not be reordered). Each score still sums its terms in
      // dimension order, so results equal the dot-product form.
      kt.resize(static_cast<size_t>(head_dim) * len);
      scores.resize(len);
      for (int j = 0; j < len; ++j) {
        const float* kj = k + static_cast<int64_t>(begin + j) * k_stride + kvh * head_dim;
        for (int d = 0; d < head_dim; ++d) kt[static_cast<size_t>(d) * len + j] = kj[d];
      }
      for (int i = 0; i < len; ++i) {
        const float* qi = q + static_cast<int64_t>(begin + i) * q_stride + h * head_dim;
        const int kmax = causal ? i + 1 : kv_lens ? std::min(len, kv_lens[s]) : len;
        std::fill(scores.begin(), scores.begin() + kmax, 0.0f);
        for (int d = 0; d < head_dim; ++d) {
          const float qd = qi[d];
          const float* row = kt.data() + static_cast<size_t>(d) * len;
          for (int j = 0; j < kmax; ++j) scores[j] += qd * row[j];
        }
        float mx = -INFINITY;
        for (int j = 0; j < kmax; ++j) {
          scores[j] *= scale;
          mx = std::max(mx, scores[j]);
        }
        for (int j = 0; j < kmax; ++j) scores[j] = vec::Exp(scores[j] - mx);
        float sum = 0;
        for (int j = 0; j < kmax; ++j) sum += scores[j];
        for (int j = 0; j < kmax; ++j) scores[j] /= sum;
        const float* vh = v + static_cast<int64_t>(begin) * v_stride + kvh * head_dim;
        float* o = out + (static_cast<int64_t>(begin + i) * num_heads + h) * head_dim;
        switch (head_dim) {
          case 32:
            WeightedRows<32>(scores.data(), kmax, vh, v_stride, 32, o);
            break;
          case 64:
            WeightedRows<64>(scores.data(), kmax, vh, v_stride, 64, o);
            break;
          case 128:
            WeightedRows<128>(scores.data(), kmax, vh, v_stride, 128, o);
            break;
          default:
            WeightedRows<0>(scores.data(), kmax, vh, v_stride, head_dim, o);
            break;
        }
      }
    }
  }
}

void Pool(const float* hidden, const int32_t* cu_seqlens, int num_seqs, int dim, Pooling mode,
          bool normalize, float* out) {
  for (int s = 0; s < num_seqs; ++s) {
    const int begin = cu_seqlens[s], end = cu_seqlens[s + 1];
    float* o = out + static_cast<int64_t>(s) * dim;
    std::fill(o, o + dim, 0.0f);
    if (end <= begin) continue;
    if (mode == Pooling::kMean) {
      std::vector<double> acc(dim, 0.0);
      for (int t = begin; t < end; ++t) {
        const float* h = hidden + static_cast<int64_t>(t) * dim;
        for (int i = 0; i < dim; ++i) acc[i] += h[i];
      }
      for (int i = 0; i < dim; ++i) o[i] = static_cast<float>(acc[i] / (end - begin));
    } else {
      const int t = mode == Pooling::kCls ? begin : end - 1;
      std::copy(hidden + static_cast<int64_t>(t) * dim, hidden + static_cast<int64_t>(t + 1) * dim,
                o);
    }
    if (normalize) {
      double ss = 0;
      for (int i = 0; i < dim; ++i) ss += static_cast<double>(o[i]) * o[i];
      const float inv = static_cast<float>(1.0 / std::max(std::sqrt(ss), 1e-12));
      for (int i = 0; i < dim; ++i) o[i] *= inv;
    }
  }
}

}  // namespace petal::cpu
