#include "kernels/cpu/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "kernels/cpu/ops.h"

namespace petal::cpu {
namespace {

float Apply(RoundFn round, float v) { return round ? round(v) : v; }
int Clamp(int v, int n) { return std::min(std::max(v, 0), n - 1); }

}  // namespace

void L2NormalizeRows(const float* x, int rows, int dim, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<int64_t>(r) * dim;
    float ss = 0.0f;
    for (int j = 0; j < dim; ++j) ss += xr[j] * xr[j];
    const float inv = 1.0f / std::max(std::sqrt(ss), 1e-12f);
    float* o = out + static_cast<int64_t>(r) * dim;
    for (int j = 0; j < dim; ++j) o[j] = xr[j] * inv;
  }
}

void SeqInfo(const int32_t* cu_seqlens, int num_seqs, int rows, int32_t* seq_ids,
             int32_t* positions) {
  for (int t = 0; t < rows; ++t) {
    int sid = -1, pos = 0;
    for (int s = 0; s < num_seqs; ++s) {
      if (t >= cu_seqlens[s] && t < cu_seqlens[s + 1]) sid = s, pos = t - cu_seqlens[s];
    }
    if (seq_ids) seq_ids[t] = sid;
    if (positions) positions[t] = pos;
  }
}

void Embedding(const int32_t* ids, const float* table, int vocab, float* out, int rows, int dim) {
  for (int t = 0; t < rows; ++t) {
    float* o = out + static_cast<int64_t>(t) * dim;
    if (ids[t] < 0 || ids[t] >= vocab) {
      std::fill(o, o + dim, 0.0f);
    } else {
      std::copy(table + static_cast<int64_t>(ids[t]) * dim,
                table + static_cast<int64_t>(ids[t] + 1) * dim, o);
    }
  }
}

void BertEmbedding(const int32_t* ids, const int32_t* positions, const int32_t* type_ids,
                   const float* word, const float* pos, const float* type, int vocab,
                   int max_positions, int num_types, int position_offset, const float* gamma,
                   const float* beta, float eps, float* out, int rows, int dim) {
  std::vector<float> sum(static_cast<size_t>(rows) * dim);
  for (int t = 0; t < rows; ++t) {
    const int64_t w = Clamp(ids[t], vocab);
    const int64_t p = Clamp(positions[t] + position_offset, max_positions);
    const int64_t ty = type_ids ? Clamp(type_ids[t], num_types) : 0;
    for (int i = 0; i < dim; ++i) {
      sum[static_cast<size_t>(t) * dim + i] =
          word[w * dim + i] + pos[p * dim + i] + type[ty * dim + i];
    }
  }
  LayerNorm(sum.data(), gamma, beta, eps, out, rows, dim);
}

void AddLayerNorm(const float* x, const float* residual, const float* gamma, const float* beta,
                  float eps, float* out, int rows, int dim, RoundFn round) {
  const size_t n = static_cast<size_t>(rows) * dim;
  std::vector<float> s(x, x + n);
  if (residual) {
    for (size_t i = 0; i < n; ++i) s[i] = Apply(round, x[i] + residual[i]);
  }
  LayerNorm(s.data(), gamma, beta, eps, out, rows, dim);
}

void AddRmsNorm(const float* x, float* residual, const float* weight, float eps, float* out,
                int rows, int dim, RoundFn round) {
  const size_t n = static_cast<size_t>(rows) * dim;
  if (x) {
    for (size_t i = 0; i < n; ++i) residual[i] = Apply(round, residual[i] + x[i]);
  }
  RmsNorm(residual, weight, eps, out, rows, dim);
}

void QkNormRope(float* qkv, int rows, int row_stride, int num_q_heads, int num_kv_heads,
                int head_dim, const float* q_norm_weight, const float* k_norm_weight, float eps,
                const int32_t* positions, double theta) {
  const int heads = num_q_heads + num_kv_heads, half = head_dim / 2;
  for (int t = 0; t < rows; ++t) {
    float* row = qkv + static_cast<int64_t>(t) * row_stride;
    for (int h = 0; h < heads; ++h) {
      float* v = row + static_cast<int64_t>(h) * head_dim;
      if (q_norm_weight || k_norm_weight) {
        RmsNorm(v, h < num_q_heads ? q_norm_weight : k_norm_weight, eps, v, 1, head_dim);
      }
      if (!positions) continue;
      for (int j = 0; j < half; ++j) {
        const double angle = positions[t] * std::pow(theta, -2.0 * j / head_dim);
        const float c = static_cast<float>(std::cos(angle)),
                    sn = static_cast<float>(std::sin(angle));
        const float a = v[j], b = v[j + half];
        v[j] = a * c - b * sn;
        v[j + half] = b * c + a * sn;
      }
    }
  }
}

void PoolDims(const float* hidden, const int32_t* cu_seqlens, int num_seqs, int dim, int out_dims,
              Pooling mode, bool normalize, float* out) {
  if (out_dims == 0) out_dims = dim;
  // Pooling is per feature, so pooling all features and keeping the first out_dims is the same
  // as pooling the truncated rows; the normalisation is over the kept features only.
  std::vector<float> full(static_cast<size_t>(num_seqs) * dim);
  Pool(hidden, cu_seqlens, num_seqs, dim, mode, false, full.data());
  for (int s = 0; s < num_seqs; ++s) {
    const float* row = full.data() + static_cast<size_t>(s) * dim;
    float* o = out + static_cast<size_t>(s) * out_dims;
    double ss = 0;
    for (int i = 0; i < out_dims; ++i) ss += static_cast<double>(row[i]) * row[i];
    const double inv = normalize ? 1.0 / std::max(std::sqrt(ss), 1e-12) : 1.0;
    for (int i = 0; i < out_dims; ++i) o[i] = static_cast<float>(row[i] * inv);
  }
}

void DenseRows(const float* x, int x_stride, const float* w, const float* bias, bool tanh, float* y,
               int rows, int out, int in) {
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      float acc = 0.f;
      for (int k = 0; k < in; ++k) acc += x[int64_t{r} * x_stride + k] * w[int64_t{o} * in + k];
      if (bias) acc += bias[o];
      y[int64_t{r} * out + o] = tanh ? std::tanh(acc) : acc;
    }
  }
}

void SparseMaxPool(const float* logits, int ld, int row0, int rows, int vocab,
                   const int32_t* cu_seqlens, int num_seqs, float* out) {
  for (int s = 0; s < num_seqs; ++s) {
    float* o = out + static_cast<int64_t>(s) * vocab;
    const int begin = std::max(cu_seqlens[s], row0);
    const int end = std::min(cu_seqlens[s + 1], row0 + rows);
    for (int t = begin; t < end; ++t) {
      const float* l = logits + static_cast<int64_t>(t - row0) * ld;
      for (int v = 0; v < vocab; ++v) {
        if (l[v] > 0) o[v] = std::max(o[v], std::log1p(l[v]));
      }
    }
  }
}

void SparseCompact(const float* dense, int ld, int rows, int vocab, const int32_t* top_k,
                   int64_t stride, int32_t* counts, int32_t* indices, float* values) {
  std::vector<float> kept;
  for (int r = 0; r < rows; ++r) {
    const float* row = dense + static_cast<int64_t>(r) * ld;
    kept.clear();
    for (int v = 0; v < vocab; ++v) {
      if (row[v] > 0) kept.push_back(row[v]);
    }
    const int k = top_k != nullptr ? top_k[r] : 0;
    float threshold = 0;  // kept: value > threshold, or == threshold among the first `take`
    int64_t take = 0;
    if (k > 0 && static_cast<int64_t>(kept.size()) > k) {
      std::nth_element(kept.begin(), kept.begin() + (k - 1), kept.end(), std::greater<float>());
      threshold = kept[k - 1];
      const int64_t above =
          std::count_if(kept.begin(), kept.end(), [&](float x) { return x > threshold; });
      take = k - above;
    }
    int32_t n = 0;
    for (int v = 0; v < vocab; ++v) {
      const float x = row[v];
      if (!(x > 0) || x < threshold || (x == threshold && take-- <= 0)) continue;
      indices[static_cast<int64_t>(r) * stride + n] = v;
      values[static_cast<int64_t>(r) * stride + n] = x;
      ++n;
    }
    counts[r] = n;
  }
}

namespace {
double InvRms(const float* r, int dim, float eps) {
  double ss = 0;
  for (int i = 0; i < dim; ++i) ss += static_cast<double>(r[i]) * r[i];
  return 1.0 / std::sqrt(ss / dim + eps);
}
}  // namespace

void RmsScaledQkv(float* qkv, int rows, int row_stride, int num_q_heads, int num_kv_heads,
                  int head_dim, const float* r, int r_dim, float r_eps, const float* bias,
                  const float* q_norm_weight, const float* k_norm_weight, float eps,
                  const int32_t* positions, double theta) {
  const int cols = (num_q_heads + 2 * num_kv_heads) * head_dim;
  for (int t = 0; t < rows; ++t) {
    const double s = InvRms(r + static_cast<int64_t>(t) * r_dim, r_dim, r_eps);
    float* row = qkv + static_cast<int64_t>(t) * row_stride;
    for (int c = 0; c < cols; ++c)
      row[c] = static_cast<float>(s * row[c] + (bias != nullptr ? bias[c] : 0.0));
  }
  QkNormRope(qkv, rows, row_stride, num_q_heads, num_kv_heads, head_dim, q_norm_weight,
             k_norm_weight, eps, positions, theta);
}

void RmsScaledSiluMul(const float* gate_up, const float* r, int r_dim, float r_eps, float* out,
                      int rows, int inter) {
  for (int t = 0; t < rows; ++t) {
    const double s = InvRms(r + static_cast<int64_t>(t) * r_dim, r_dim, r_eps);
    const float* g = gate_up + static_cast<int64_t>(t) * 2 * inter;
    for (int i = 0; i < inter; ++i) {
      const double a = s * g[i], u = s * g[inter + i];
      out[static_cast<int64_t>(t) * inter + i] = static_cast<float>(a / (1.0 + std::exp(-a)) * u);
    }
  }
}

}  // namespace petal::cpu
