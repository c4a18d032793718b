#include "kernels/cpu/ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace petal::cpu {

void Gemm(const float* x, const float* w, const float* bias, float* y, int m, int n, int k) {
  if (m == 0 || n == 0) return;
  if (bias) {
    for (int r = 0; r < m; ++r) std::copy(bias, bias + n, y + static_cast<int64_t>(r) * n);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, bias ? 1.0f : 0.0f,
              y, n);
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
  for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
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
        const float c = static_cast<float>(std::cos(angle)), sn = static_cast<float>(std::sin(angle));
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

void Attention(const float* q, int q_stride, const float* k, int k_stride, const float* v,
               int v_stride, float* out, const int32_t* cu_seqlens, int num_seqs, int num_heads,
               int num_kv_heads, int head_dim, bool causal, float scale) {
  const int group = num_heads / num_kv_heads;
  for (int s = 0; s < num_seqs; ++s) {
    const int begin = cu_seqlens[s], len = cu_seqlens[s + 1] - cu_seqlens[s];
    if (len <= 0) continue;
#pragma omp parallel
    {
      std::vector<float> scores(len);
#pragma omp for collapse(2) schedule(dynamic, 4)
      for (int h = 0; h < num_heads; ++h) {
        for (int i = 0; i < len; ++i) {
          const int kvh = h / group;
          const float* qi = q + static_cast<int64_t>(begin + i) * q_stride + h * head_dim;
          const int kmax = causal ? i + 1 : len;
          float mx = -INFINITY;
          for (int j = 0; j < kmax; ++j) {
            const float* kj = k + static_cast<int64_t>(begin + j) * k_stride + kvh * head_dim;
            float dot = 0;
            for (int d = 0; d < head_dim; ++d) dot += qi[d] * kj[d];
            scores[j] = dot * scale;
            mx = std::max(mx, scores[j]);
          }
          float sum = 0;
          for (int j = 0; j < kmax; ++j) {
            scores[j] = std::exp(scores[j] - mx);
            sum += scores[j];
          }
          float* o = out + (static_cast<int64_t>(begin + i) * num_heads + h) * head_dim;
          std::fill(o, o + head_dim, 0.0f);
          for (int j = 0; j < kmax; ++j) {
            const float p = scores[j] / sum;
            const float* vj = v + static_cast<int64_t>(begin + j) * v_stride + kvh * head_dim;
            for (int d = 0; d < head_dim; ++d) o[d] += p * vj[d];
          }
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
      std::copy(hidden + static_cast<int64_t>(t) * dim, hidden + static_cast<int64_t>(t + 1) * dim, o);
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
