// CPU test of the flash attention kernel's fragment plumbing (src/kernels/cuda/
// attention_fragments.h): emulates ldmatrix.x4 (plain and .trans) and mma.m16n8k16 as the PTX ISA
// defines them, feeds them the kernel's lane -> address formulas, and checks that one warp's
// S = Q K^T and O = P V (P taken from the S accumulators) equal the direct products. Needs no GPU,
// so layout mistakes are caught in CI. Thread-safety: a test.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cuda/attention_fragments.h"

namespace {

using petal::cuda::attn::AccumCoord;
using petal::cuda::attn::FragCoord;
using petal::cuda::attn::LdsmA;
using petal::cuda::attn::LdsmBKeyMajor;
using petal::cuda::attn::LdsmBTransposed;
using petal::cuda::attn::PRegBlock;
using petal::cuda::attn::PRegElem;

// A register of two 16-bit values, kept as floats (exact for the integers used below).
using Reg = std::array<float, 2>;
using Regs4 = std::array<std::array<Reg, 4>, 32>;  // [lane][register]

struct Matrix {
  int rows, cols;
  std::vector<float> v;
  Matrix(int r, int c) : rows(r), cols(c), v(static_cast<size_t>(r) * c, 0.0f) {}
  float& at(int r, int c) { return v[static_cast<size_t>(r) * cols + c]; }
  float at(int r, int c) const { return v[static_cast<size_t>(r) * cols + c]; }
};

// ldmatrix.sync.aligned.m8n8.x4[.trans].b16: lanes 8i..8i+7 give the addresses of rows 0..7 of
// matrix i (here: (row, col) of the row's first element in `m`, offset by (r0, c0)). Without
// .trans, lane L receives elements 2(L%4), 2(L%4)+1 of row L/4 of matrix i in register i; with
// .trans, it receives column L/4, rows 2(L%4) and 2(L%4)+1.
Regs4 LdMatrix(const Matrix& m, int r0, int c0, FragCoord (*addr)(int), bool trans) {
  Regs4 out{};
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 2; ++j) {
        if (!trans) {
          const FragCoord a = addr(8 * i + lane / 4);
          out[lane][i][j] = m.at(r0 + a.row, c0 + a.col + 2 * (lane % 4) + j);
        } else {
          const FragCoord a = addr(8 * i + 2 * (lane % 4) + j);
          out[lane][i][j] = m.at(r0 + a.row, c0 + a.col + lane / 4);
        }
      }
    }
  }
  return out;
}

using Accum = std::array<std::array<float, 4>, 32>;  // [lane][element] of a 16x8 C fragment

// mma.sync.aligned.m16n8k16.row.col: rebuild A (16x16) and B (16x8) from the fragment layouts
// of the PTX ISA (groupID = lane / 4, threadID_in_group = lane % 4), then C += A * B.
void Mma(Accum& c, const std::array<std::array<Reg, 4>, 32>& a, const Regs4& b, int b_first) {
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int j = 0; j < 2; ++j) {
      A[g][2 * t + j] = a[lane][0][j];
      A[g + 8][2 * t + j] = a[lane][1][j];
      A[g][2 * t + 8 + j] = a[lane][2][j];
      A[g + 8][2 * t + 8 + j] = a[lane][3][j];
      B[2 * t + j][g] = b[lane][b_first][j];
      B[2 * t + 8 + j][g] = b[lane][b_first + 1][j];
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int e = 0; e < 4; ++e) {
      const int row = g + (e >> 1) * 8, col = 2 * t + (e & 1);
      float sum = 0.0f;
      for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
      c[lane][e] += sum;
    }
  }
}

Matrix RandomIntMatrix(int rows, int cols, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(-4, 4);
  Matrix m(rows, cols);
  for (float& x : m.v) x = static_cast<float>(dist(rng));
  return m;
}

TEST(AttentionFragments, AccumCoordMatchesPtxLayout) {
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(AccumCoord(lane, 0).row, lane / 4);
    EXPECT_EQ(AccumCoord(lane, 3).row, lane / 4 + 8);
    EXPECT_EQ(AccumCoord(lane, 1).col, 2 * (lane % 4) + 1);
  }
}

// One warp: 16 query rows, kKeys keys, kDim dims, exactly the loop structure of the kernel.
TEST(AttentionFragments, WarpQkAndPvMatchDirectProducts) {
  constexpr int kRows = 16, kKeys = 64, kDim = 128;
  std::mt19937 rng(3);
  const Matrix q = RandomIntMatrix(kRows, kDim, rng);
  const Matrix k = RandomIntMatrix(kKeys, kDim, rng);  // rows [key][dim], as in shared memory
  const Matrix v = RandomIntMatrix(kKeys, kDim, rng);

  // S = Q K^T: per k-step kc, A from Q (LdsmA) and, per 16 keys, B from K (LdsmBKeyMajor).
  std::vector<Accum> s(kKeys / 8, Accum{});
  for (int kc = 0; kc < kDim / 16; ++kc) {
    const Regs4 qa = LdMatrix(q, 0, kc * 16, LdsmA, false);
    for (int nb = 0; nb < kKeys / 16; ++nb) {
      const Regs4 kb = LdMatrix(k, nb * 16, kc * 16, LdsmBKeyMajor, false);
      Mma(s[2 * nb], qa, kb, 0);
      Mma(s[2 * nb + 1], qa, kb, 2);
    }
  }
  Matrix s_direct(kRows, kKeys);
  for (int r = 0; r < kRows; ++r) {
    for (int n = 0; n < kKeys; ++n) {
      float sum = 0.0f;
      for (int d = 0; d < kDim; ++d) sum += q.at(r, d) * k.at(n, d);
      s_direct.at(r, n) = sum;
    }
  }
  for (int nb = 0; nb < kKeys / 8; ++nb) {
    for (int lane = 0; lane < 32; ++lane) {
      for (int e = 0; e < 4; ++e) {
        const FragCoord rc = AccumCoord(lane, e);
        ASSERT_EQ(s[nb][lane][e], s_direct.at(rc.row, nb * 8 + rc.col))
            << "S n-block " << nb << " lane " << lane << " element " << e;
      }
    }
  }

  // Use S (small integers) itself as "P": O = P V, with P's A fragments packed from the S
  // accumulators (PRegBlock / PRegElem) and B from V (LdsmBTransposed, .trans).
  std::vector<Accum> o(kDim / 8, Accum{});
  for (int kc = 0; kc < kKeys / 16; ++kc) {
    std::array<std::array<Reg, 4>, 32> pa{};
    for (int lane = 0; lane < 32; ++lane) {
      for (int r = 0; r < 4; ++r) {
        const auto& src = s[2 * kc + PRegBlock(r)][lane];
        pa[lane][r] = {src[PRegElem(r)], src[PRegElem(r) + 1]};
      }
    }
    for (int dp = 0; dp < kDim / 16; ++dp) {
      const Regs4 vb = LdMatrix(v, kc * 16, dp * 16, LdsmBTransposed, true);
      Mma(o[2 * dp], pa, vb, 0);
      Mma(o[2 * dp + 1], pa, vb, 2);
    }
  }
  for (int db = 0; db < kDim / 8; ++db) {
    for (int lane = 0; lane < 32; ++lane) {
      for (int e = 0; e < 4; ++e) {
        const FragCoord rc = AccumCoord(lane, e);
        double sum = 0.0;
        for (int n = 0; n < kKeys; ++n)
          sum += double(s_direct.at(rc.row, n)) * v.at(n, db * 8 + rc.col);
        ASSERT_EQ(o[db][lane][e], static_cast<float>(sum))
            << "O d-block " << db << " lane " << lane << " element " << e;
      }
    }
  }
}

}  // namespace
