#include "kernels/cpu/cpu_fused.h"

#include <cmath>

#include "kernels/cpu/cpu_bf16_gemm.h"
#include "kernels/cpu/cpu_features.h"

namespace petal::cpu {
namespace {

#define PETAL_INLINE inline __attribute__((always_inline))
#define PETAL_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,prefer-vector-width=512")))

// Row reductions in 16 independent partial sums, added up in a fixed order: a plain sequential
// float sum cannot vectorise (each add waits for the last: ~4 cycles a value), 16 lanes let it
// become two ymm or one zmm accumulator. The same order whatever the ISA variant.
PETAL_INLINE float LaneSum(const float* v, int n) {
  float acc[16] = {};
  int i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += v[i + j];
  float s = 0.0f;
  for (int j = 0; j < 16; ++j) s += acc[j];
  for (; i < n; ++i) s += v[i];
  return s;
}

PETAL_INLINE float LaneSquares(const float* v, int n, float mean) {
  float acc[16] = {};
  int i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += (v[i + j] - mean) * (v[i + j] - mean);
  float s = 0.0f;
  for (int j = 0; j < 16; ++j) s += acc[j];
  for (; i < n; ++i) s += (v[i] - mean) * (v[i] - mean);
  return s;
}

PETAL_INLINE void AddLayerNormRow(float* xr, const float* rr, const float* gamma, const float* beta,
                                  float eps, int dim) {
  if (rr) {
    for (int i = 0; i < dim; ++i) xr[i] += rr[i];
  }
  const float mean = LaneSum(xr, dim) / dim;
  const float inv = 1.0f / std::sqrt(LaneSquares(xr, dim, mean) / dim + eps);
  for (int i = 0; i < dim; ++i) xr[i] = (xr[i] - mean) * inv * gamma[i] + beta[i];
}

PETAL_INLINE void AddRmsNormRow(float* xr, const float* rr, const float* weight, float eps,
                                float* o, int dim) {
  if (rr) {
    for (int i = 0; i < dim; ++i) xr[i] += rr[i];
  }
  const float inv = 1.0f / std::sqrt(LaneSquares(xr, dim, 0.0f) / dim + eps);
  for (int i = 0; i < dim; ++i) o[i] = xr[i] * inv * weight[i];
}

// The AVX-512 variants (chosen at run time from DetectCpuFeatures(), so PETAL_CPU_ISA caps
// them) and the build's baseline (x86-64-v3: AVX2 + FMA).
PETAL_AVX512 void AddLayerNormRowAvx512(float* xr, const float* rr, const float* g, const float* b,
                                        float eps, int dim) {
  AddLayerNormRow(xr, rr, g, b, eps, dim);
}
void AddLayerNormRowBase(float* xr, const float* rr, const float* g, const float* b, float eps,
                         int dim) {
  AddLayerNormRow(xr, rr, g, b, eps, dim);
}
PETAL_AVX512 void AddRmsNormRowAvx512(float* xr, const float* rr, const float* w, float eps,
                                      float* o, int dim) {
  AddRmsNormRow(xr, rr, w, eps, o, dim);
}
void AddRmsNormRowBase(float* xr, const float* rr, const float* w, float eps, float* o, int dim) {
  AddRmsNormRow(xr, rr, w, eps, o, dim);
}

}  // namespace

void AddLayerNorm(float* x, const float* res, const float* gamma, const float* beta, float eps,
                  int rows, int dim, uint16_t* out_bf16) {
  const auto row = DetectCpuFeatures().avx512 ? AddLayerNormRowAvx512 : AddLayerNormRowBase;
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    float* xr = x + static_cast<int64_t>(r) * dim;
    row(xr, res ? res + static_cast<int64_t>(r) * dim : nullptr, gamma, beta, eps, dim);
    if (out_bf16) ConvertToBf16(xr, dim, out_bf16 + static_cast<int64_t>(r) * dim);
  }
}

void AddRmsNorm(float* x, const float* res, const float* weight, float eps, float* out, int rows,
                int dim) {
  const auto row = DetectCpuFeatures().avx512 ? AddRmsNormRowAvx512 : AddRmsNormRowBase;
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const int64_t o = static_cast<int64_t>(r) * dim;
    row(x + o, res ? res + o : nullptr, weight, eps, out + o, dim);
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
