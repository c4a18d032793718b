#include "kernels/cpu/cpu_fused.h"

#include <cmath>

#include "kernels/cpu/cpu_bf16_gemm.h"

namespace petal::cpu {

void AddLayerNorm(float* x, const float* res, const float* gamma, const float* beta, float eps,
                  int rows, int dim, uint16_t* out_bf16) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    float* xr = x + static_cast<int64_t>(r) * dim;
    if (res) {
      const float* rr = res + static_cast<int64_t>(r) * dim;
      for (int i = 0; i < dim; ++i) xr[i] += rr[i];
    }
    float sum = 0.0f;
    for (int i = 0; i < dim; ++i) sum += xr[i];
    const float mean = sum / dim;
    float var = 0.0f;
    for (int i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const float inv = 1.0f / std::sqrt(var / dim + eps);
    for (int i = 0; i < dim; ++i) xr[i] = (xr[i] - mean) * inv * gamma[i] + beta[i];
    if (out_bf16) ConvertToBf16(xr, dim, out_bf16 + static_cast<int64_t>(r) * dim);
  }
}

void AddRmsNorm(float* x, const float* res, const float* weight, float eps, float* out, int rows,
                int dim) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    float* xr = x + static_cast<int64_t>(r) * dim;
    if (res) {
      const float* rr = res + static_cast<int64_t>(r) * dim;
      for (int i = 0; i < dim; ++i) xr[i] += rr[i];
    }
    float ss = 0.0f;
    for (int i = 0; i < dim; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / dim + eps);
    float* o = out + static_cast<int64_t>(r) * dim;
    for (int i = 0; i < dim; ++i) o[i] = xr[i] * inv * weight[i];
  }
}

void HeadRmsNorm(float* x, int row_stride, int rows, int heads, int dim, const float* weight,
                 float eps) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    for (int h = 0; h < heads; ++h) {
      float* v = x + static_cast<int64_t>(r) * row_stride + h * dim;
      float ss = 0.0f;
      for (int i = 0; i < dim; ++i) ss += v[i] * v[i];
      const float inv = 1.0f / std::sqrt(ss / dim + eps);
      for (int i = 0; i < dim; ++i) v[i] = v[i] * inv * weight[i];
    }
  }
}

RopeTable::RopeTable(int positions, int head_dim, double theta) : half(head_dim / 2) {
  cos.resize(static_cast<size_t>(positions) * half);
  sin.resize(static_cast<size_t>(positions) * half);
  std::vector<double> inv_freq(half);
  for (int j = 0; j < half; ++j) inv_freq[j] = std::pow(theta, -2.0 * j / head_dim);
#pragma omp parallel for schedule(static)
  for (int p = 0; p < positions; ++p) {
    for (int j = 0; j < half; ++j) {
      const double angle = p * inv_freq[j];
      cos[static_cast<size_t>(p) * half + j] = static_cast<float>(std::cos(angle));
      sin[static_cast<size_t>(p) * half + j] = static_cast<float>(std::sin(angle));
    }
  }
}

void RopeQK(float* x, int row_stride, int q_heads, int k_heads, int head_dim,
            const int32_t* cu_seqlens, int num_seqs, const RopeTable& table) {
  const int half = head_dim / 2, heads = q_heads + k_heads;
  const int total = cu_seqlens[num_seqs];
#pragma omp parallel for schedule(static)
  for (int t = 0; t < total; ++t) {
    // The sequence holding token t (few sequences per batch: a linear scan is cheap).
    int s = 0;
    while (cu_seqlens[s + 1] <= t) ++s;
    const int pos = t - cu_seqlens[s];
    const float* c = table.cos.data() + static_cast<size_t>(pos) * half;
    const float* sn = table.sin.data() + static_cast<size_t>(pos) * half;
    float* row = x + static_cast<int64_t>(t) * row_stride;
    for (int h = 0; h < heads; ++h) {
      float* v = row + h * head_dim;
      for (int j = 0; j < half; ++j) {
        const float a = v[j], b = v[j + half];
        v[j] = a * c[j] - b * sn[j];
        v[j + half] = b * c[j] + a * sn[j];
      }
    }
  }
}

}  // namespace petal::cpu
