// Tests for the named CPU references of the CUDA ops (reference_ops.h) and the host bf16
// conversions (bf16.h), against straightforward float64 loops on random inputs. Tolerances:
// fp32 references vs float64: 2e-5 absolute on O(1) outputs (norms of <= 1024 values); gathers
// and sequence info exact.
#include "kernels/cpu/reference_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/ops.h"

namespace petal::cpu {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Row-wise (x - mean) / sqrt(var + eps) * g + b, or x / sqrt(mean(x^2) + eps) * g, in double.
std::vector<double> NormRows(const std::vector<double>& x, int rows, int dim, const float* g,
                             const float* b, double eps, bool rms) {
  std::vector<double> out(x.size());
  for (int r = 0; r < rows; ++r) {
    const double* v = x.data() + static_cast<size_t>(r) * dim;
    double mean = 0, sq = 0;
    for (int i = 0; i < dim; ++i) mean += v[i] / dim;
    if (rms) mean = 0;
    for (int i = 0; i < dim; ++i) sq += (v[i] - mean) * (v[i] - mean) / dim;
    for (int i = 0; i < dim; ++i) {
      out[static_cast<size_t>(r) * dim + i] =
          (v[i] - mean) / std::sqrt(sq + eps) * g[i] + (b ? b[i] : 0.0);
    }
  }
  return out;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LE(worst, tol);
}

TEST(Bf16, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(RoundBf16(1.0f + 0x1p-8f), 1.0f);                       // tie: to the even mantissa
  EXPECT_EQ(RoundBf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);         // tie: to the even mantissa
  EXPECT_EQ(RoundBf16(1.0f + 0x1p-8f + 0x1p-12f), 1.0f + 0x1p-7f);  // above the tie: up
  EXPECT_TRUE(std::isnan(RoundBf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(RoundBf16(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  for (float x : Random(1000, 1, -100.f, 100.f)) {
    const float r = RoundBf16(x);
    EXPECT_LE(std::fabs(r - x), std::fabs(x) * 0x1p-8f) << x;  // half an ulp (2^-7 relative)
    EXPECT_EQ(FromBf16Bits(ToBf16Bits(r)), r);                 // representable values are fixed
  }
}

TEST(ReferenceOps, SeqInfoMarksPaddingAndRestartsPositions) {
  const int32_t cu[] = {0, 3, 3, 7};
  int32_t ids[9], pos[9];
  SeqInfo(cu, 3, 9, ids, pos);
  const int32_t want_ids[] = {0, 0, 0, 2, 2, 2, 2, -1, -1};
  const int32_t want_pos[] = {0, 1, 2, 0, 1, 2, 3, 0, 0};
  for (int t = 0; t < 9; ++t) {
    EXPECT_EQ(ids[t], want_ids[t]) << t;
    EXPECT_EQ(pos[t], want_pos[t]) << t;
  }
  SeqInfo(cu, 3, 9, nullptr, pos);  // either output may be null
}

TEST(ReferenceOps, EmbeddingGathersAndZeroesInvalidIds) {
  const int vocab = 50, dim = 6, rows = 5;
  const auto table = Random(vocab * dim, 2);
  const int32_t ids[rows] = {3, -1, 49, 50, 0};
  std::vector<float> out(rows * dim, 7.f);
  Embedding(ids, table.data(), vocab, out.data(), rows, dim);
  for (int t = 0; t < rows; ++t)
    for (int i = 0; i < dim; ++i) {
      const bool valid = ids[t] >= 0 && ids[t] < vocab;
      EXPECT_EQ(out[t * dim + i], valid ? table[ids[t] * dim + i] : 0.f) << t;
    }
}

TEST(ReferenceOps, BertEmbeddingMatchesDoubleLoopAndClamps) {
  const int vocab = 30, max_pos = 16, types = 2, dim = 64, rows = 7;
  const auto word = Random(vocab * dim, 3), pos = Random(max_pos * dim, 4),
             type = Random(types * dim, 5), g = Random(dim, 6, 0.5f, 1.5f),
             b = Random(dim, 7, -0.5f, 0.5f);
  const int32_t ids[rows] = {1, 29, 40, -3, 5, 6, 7};  // 40 and -3 clamp to 29 and 0
  const int32_t positions[rows] = {0, 1, 2, 20, 3, 0, 1};
  const int32_t tt[rows] = {0, 1, 1, 0, 5, 0, 1};
  for (bool with_types : {true, false}) {
    std::vector<float> out(rows * dim);
    BertEmbedding(ids, positions, with_types ? tt : nullptr, word.data(), pos.data(), type.data(),
                  vocab, max_pos, types, 1, g.data(), b.data(), 1e-12f, out.data(), rows, dim);
    std::vector<double> sum(rows * dim);
    for (int t = 0; t < rows; ++t) {
      const int w = std::clamp(ids[t], 0, vocab - 1),
                p = std::clamp(positions[t] + 1, 0, max_pos - 1);
      const int ty = with_types ? std::clamp(tt[t], 0, types - 1) : 0;
      for (int i = 0; i < dim; ++i)
        sum[t * dim + i] = double(word[w * dim + i]) + pos[p * dim + i] + type[ty * dim + i];
    }
    ExpectNear(out, NormRows(sum, rows, dim, g.data(), b.data(), 1e-12, false), 2e-5);
  }
}

TEST(ReferenceOps, AddLayerNormAndAddRmsNormMatchDoubleLoops) {
  const int rows = 9, dim = 384;
  const size_t n = rows * dim;
  const auto x = Random(n, 8, -2.f, 2.f), r = Random(n, 9, -2.f, 2.f);
  const auto g = Random(dim, 10, 0.5f, 1.5f), b = Random(dim, 11, -0.5f, 0.5f);
  for (RoundFn round : {static_cast<RoundFn>(nullptr), static_cast<RoundFn>(&RoundBf16)}) {
    std::vector<double> s(n);
    for (size_t i = 0; i < n; ++i) s[i] = round ? round(x[i] + r[i]) : double(x[i] + r[i]);
    std::vector<float> out(n);
    AddLayerNorm(x.data(), r.data(), g.data(), b.data(), 1e-12f, out.data(), rows, dim, round);
    ExpectNear(out, NormRows(s, rows, dim, g.data(), b.data(), 1e-12, false), 2e-5);
    std::vector<float> res = r;
    AddRmsNorm(x.data(), res.data(), g.data(), 1e-6f, out.data(), rows, dim, round);
    ExpectNear(out, NormRows(s, rows, dim, g.data(), nullptr, 1e-6, true), 2e-5);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(res[i], static_cast<float>(s[i])) << i;
  }
  // Without the add: a plain norm of x (LayerNorm) / of the residual (RmsNorm), in place.
  std::vector<double> xd(x.begin(), x.end());
  std::vector<float> out(n);
  AddLayerNorm(x.data(), nullptr, g.data(), b.data(), 1e-12f, out.data(), rows, dim, nullptr);
  ExpectNear(out, NormRows(xd, rows, dim, g.data(), b.data(), 1e-12, false), 2e-5);
  std::vector<float> inplace = x;
  AddRmsNorm(nullptr, inplace.data(), g.data(), 1e-6f, inplace.data(), rows, dim, nullptr);
  ExpectNear(inplace, NormRows(xd, rows, dim, g.data(), nullptr, 1e-6, true), 2e-5);
}

TEST(ReferenceOps, QkNormRopeMatchesDoubleLoopAndLeavesVAlone) {
  const int hq = 4, hkv = 2, d = 34, rows = 6, stride = (hq + 2 * hkv) * d;
  const auto qkv = Random(rows * stride, 12);
  const auto qw = Random(d, 13, 0.5f, 1.5f), kw = Random(d, 14, 0.5f, 1.5f);
  const int32_t positions[rows] = {0, 1, 2, 0, 1, 30000};
  for (bool norm : {true, false}) {
    std::vector<float> got = qkv;
    QkNormRope(got.data(), rows, stride, hq, hkv, d, norm ? qw.data() : nullptr,
               norm ? kw.data() : nullptr, 1e-6f, positions, 1e6);
    std::vector<double> want(qkv.begin(), qkv.end());
    for (int t = 0; t < rows; ++t)
      for (int h = 0; h < hq + hkv; ++h) {
        double* v = want.data() + t * stride + h * d;
        if (norm) {
          double ss = 0;
          for (int i = 0; i < d; ++i) ss += v[i] * v[i] / d;
          for (int i = 0; i < d; ++i) v[i] = v[i] / std::sqrt(ss + 1e-6) * (h < hq ? qw[i] : kw[i]);
        }
        for (int j = 0; j < d / 2; ++j) {
          const double a = positions[t] * std::pow(1e6, -2.0 * j / d);
          const double x0 = v[j], x1 = v[j + d / 2];
          v[j] = x0 * std::cos(a) - x1 * std::sin(a);
          v[j + d / 2] = x1 * std::cos(a) + x0 * std::sin(a);
        }
      }
    ExpectNear(got, want, 2e-5);
    for (int t = 0; t < rows; ++t)
      for (int i = (hq + hkv) * d; i < stride; ++i)
        ASSERT_EQ(got[t * stride + i], qkv[t * stride + i]);
  }
}

// The fold behind the CUDA forward's RmsScaled* ops: RmsNorm(r) * g feeding a GEMM equals the
// GEMM of r with g folded into the weights, scaled per token afterwards. Checked through both
// consumers (the QKV one with a bias, q/k norms and rotary; SwiGLU), against the unfolded chain.
TEST(ReferenceOps, FoldedRmsNormMatchesNormThenGemm) {
  const int rows = 5, dim = 64, hq = 2, hkv = 1, hd = 16, inter = 24;
  const int qkv_cols = (hq + 2 * hkv) * hd;
  const float eps = 1e-6f;
  auto r = Random(rows * dim, 301, -3.f, 3.f);
  const auto g = Random(dim, 302, 0.5f, 1.5f);
  const auto w_qkv = Random(qkv_cols * dim, 303), w_gu = Random(2 * inter * dim, 304);
  const auto bias = Random(qkv_cols, 305), qn = Random(hd, 306, 0.5f, 1.5f);
  const auto kn = Random(hd, 307, 0.5f, 1.5f);
  std::vector<int32_t> pos = {0, 1, 2, 0, 1};
  auto gemm = [&](const std::vector<float>& a, const std::vector<float>& w, int n) {
    std::vector<float> out(rows * n);
    for (int t = 0; t < rows; ++t)
      for (int j = 0; j < n; ++j) {
        double acc = 0;
        for (int k = 0; k < dim; ++k) acc += static_cast<double>(a[t * dim + k]) * w[j * dim + k];
        out[t * n + j] = static_cast<float>(acc);
      }
    return out;
  };
  auto fold = [&](std::vector<float> w, int n) {
    for (int j = 0; j < n; ++j)
      for (int k = 0; k < dim; ++k) w[j * dim + k] *= g[k];
    return w;
  };
  std::vector<float> x(rows * dim);
  AddRmsNorm(nullptr, r.data(), g.data(), eps, x.data(), rows, dim, nullptr);
  // Unfolded: x W^T + bias, then q/k norm + rotary.
  auto want = gemm(x, w_qkv, qkv_cols);
  for (int t = 0; t < rows; ++t)
    for (int c = 0; c < qkv_cols; ++c) want[t * qkv_cols + c] += bias[c];
  QkNormRope(want.data(), rows, qkv_cols, hq, hkv, hd, qn.data(), kn.data(), eps, pos.data(), 1e4);
  auto got = gemm(r, fold(w_qkv, qkv_cols), qkv_cols);
  RmsScaledQkv(got.data(), rows, qkv_cols, hq, hkv, hd, r.data(), dim, eps, bias.data(), qn.data(),
               kn.data(), eps, pos.data(), 1e4);
  // fp32 outputs of two orders of the same sums: 2e-5 relative (floored at 1).
  auto tol = [](float w) { return 2e-5 * std::max(1.0, std::fabs(static_cast<double>(w))); };
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol(want[i])) << i;
  std::vector<float> want_act(rows * inter), got_act(rows * inter);
  SiluMul(gemm(x, w_gu, 2 * inter).data(), want_act.data(), rows, inter);
  RmsScaledSiluMul(gemm(r, fold(w_gu, 2 * inter), 2 * inter).data(), r.data(), dim, eps,
                   got_act.data(), rows, inter);
  for (size_t i = 0; i < want_act.size(); ++i)
    EXPECT_NEAR(got_act[i], want_act[i], tol(want_act[i])) << i;
}

TEST(ReferenceOps, PoolDimsMatchesDoubleLoop) {
  const int dim = 40, out_dims = 12;
  const int32_t cu[] = {0, 3, 3, 10};  // the middle sequence is empty
  const auto hidden = Random(10 * dim, 15, -2.f, 2.f);
  for (Pooling mode : {Pooling::kMean, Pooling::kCls, Pooling::kLastToken}) {
    for (bool normalize : {false, true}) {
      std::vector<float> got(3 * out_dims);
      PoolDims(hidden.data(), cu, 3, dim, out_dims, mode, normalize, got.data());
      std::vector<double> want(3 * out_dims, 0.0);
      for (int s = 0; s < 3; ++s) {
        const int b = cu[s], e = cu[s + 1];
        if (b == e) continue;
        for (int i = 0; i < out_dims; ++i) {
          double v = 0;
          if (mode == Pooling::kMean) {
            for (int t = b; t < e; ++t) v += double(hidden[t * dim + i]) / (e - b);
          } else {
            v = hidden[(mode == Pooling::kCls ? b : e - 1) * dim + i];
          }
          want[s * out_dims + i] = v;
        }
        if (normalize) {
          double ss = 0;
          for (int i = 0; i < out_dims; ++i) ss += want[s * out_dims + i] * want[s * out_dims + i];
          for (int i = 0; i < out_dims; ++i) want[s * out_dims + i] /= std::sqrt(ss);
        }
      }
      ExpectNear(got, want, 2e-6);
    }
  }
}

TEST(ReferenceOps, DenseRowsMatchesFloat64WithAndWithoutTanh) {
  const int rows = 5, out = 7, in = 384, stride = 400;
  auto x = Random(static_cast<size_t>(rows) * stride, 11);
  auto w = Random(static_cast<size_t>(out) * in, 12, -0.1f, 0.1f);
  auto b = Random(out, 13);
  for (bool tanh : {false, true}) {
    for (const float* bias :
         {static_cast<const float*>(nullptr), static_cast<const float*>(b.data())}) {
      std::vector<float> y(static_cast<size_t>(rows) * out);
      DenseRows(x.data(), stride, w.data(), bias, tanh, y.data(), rows, out, in);
      for (int r = 0; r < rows; ++r) {
        for (int o = 0; o < out; ++o) {
          double acc = bias ? bias[o] : 0.0;
          for (int k = 0; k < in; ++k) {
            acc +=
                double{x[static_cast<size_t>(r) * stride + k]} * w[static_cast<size_t>(o) * in + k];
          }
          if (tanh) acc = std::tanh(acc);
          EXPECT_NEAR(y[static_cast<size_t>(r) * out + o], acc, 2e-5) << r << " " << o;
        }
      }
    }
  }
}

// Three chunks of a ragged batch (a sequence crossing a chunk edge, an empty sequence): the max
// over each sequence's tokens of log(1 + relu(logit)), in double, from zeroed rows.
TEST(ReferenceOps, SparseMaxPoolOverChunksMatchesFloat64) {
  const int vocab = 37, ld = 40, tokens = 11;
  const std::vector<int32_t> cu = {0, 3, 3, 9, 11};
  const int seqs = static_cast<int>(cu.size()) - 1;
  const auto logits = Random(static_cast<size_t>(tokens) * ld, 21, -2.f, 2.f);
  std::vector<float> got(static_cast<size_t>(seqs) * vocab, 0.f);
  for (int row0 : {0, 5, 10}) {  // chunks of 5, 5 and 1 tokens
    const int rows = std::min(5, tokens - row0);
    SparseMaxPool(logits.data() + static_cast<size_t>(row0) * ld, ld, row0, rows, vocab, cu.data(),
                  seqs, got.data());
  }
  for (int s = 0; s < seqs; ++s) {
    for (int v = 0; v < vocab; ++v) {
      double want = 0;
      for (int t = cu[s]; t < cu[s + 1]; ++t) {
        want = std::max(want, std::log1p(std::max(0.0, double{logits[size_t(t) * ld + v]})));
      }
      EXPECT_NEAR(got[static_cast<size_t>(s) * vocab + v], want, 1e-6) << s << " " << v;
    }
  }
}

// Rows with zeros, NaN, -0 and many ties (values on a coarse grid): every non-zero in index
// order, and with a top-k the k largest (ties at the k-th: the lowest indices) in index order,
// against a stable sort by value.
TEST(ReferenceOps, SparseCompactKeepsNonZerosInOrderAndTheTopK) {
  const int rows = 6, vocab = 53, ld = 56, stride = 60;
  std::mt19937 rng(33);
  std::uniform_int_distribution<int> grid(-4, 6);
  std::vector<float> dense(static_cast<size_t>(rows) * ld, 0.f);
  for (float& x : dense) x = std::max(0, grid(rng)) * 0.25f;
  dense[3] = std::numeric_limits<float>::quiet_NaN();
  dense[4] = -0.0f;
  std::fill(dense.begin() + 2 * ld, dense.begin() + 3 * ld, 0.f);  // an all-zero row
  const std::vector<int32_t> top_k = {0, 5, 7, 1, 1000, 12};
  for (const bool with_k : {false, true}) {
    std::vector<int32_t> counts(rows, -1), idx(static_cast<size_t>(rows) * stride, -1);
    std::vector<float> val(static_cast<size_t>(rows) * stride, -1.f);
    SparseCompact(dense.data(), ld, rows, vocab, with_k ? top_k.data() : nullptr, stride,
                  counts.data(), idx.data(), val.data());
    for (int r = 0; r < rows; ++r) {
      std::vector<int> order;
      for (int v = 0; v < vocab; ++v) {
        if (dense[static_cast<size_t>(r) * ld + v] > 0) order.push_back(v);
      }
      const float* row = dense.data() + static_cast<size_t>(r) * ld;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
      const int k = with_k ? top_k[r] : 0;
      if (k > 0 && static_cast<int>(order.size()) > k) order.resize(k);
      std::sort(order.begin(), order.end());
      ASSERT_EQ(counts[r], static_cast<int>(order.size())) << "row " << r << " k " << k;
      for (size_t j = 0; j < order.size(); ++j) {
        EXPECT_EQ(idx[static_cast<size_t>(r) * stride + j], order[j]) << r << " " << j;
        EXPECT_EQ(val[static_cast<size_t>(r) * stride + j], row[order[j]]) << r << " " << j;
      }
    }
  }
}

}  // namespace
}  // namespace petal::cpu

namespace petal::cpu {
namespace {

TEST(ReferenceOps, L2NormalizeRowsMatchesDoubleLoopAndKeepsZeroRows) {
  const int rows = 5, dim = 24;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  std::vector<float> x(rows * dim), out(rows * dim);
  for (float& v : x) v = u(rng);
  std::fill(x.begin() + 2 * dim, x.begin() + 3 * dim, 0.0f);  // a zero row stays zero
  L2NormalizeRows(x.data(), rows, dim, out.data());
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int j = 0; j < dim; ++j) ss += double{x[r * dim + j]} * x[r * dim + j];
    const double norm = std::max(std::sqrt(ss), 1e-12);
    for (int j = 0; j < dim; ++j) EXPECT_NEAR(out[r * dim + j], x[r * dim + j] / norm, 1e-6);
  }
}

}  // namespace
}  // namespace petal::cpu
