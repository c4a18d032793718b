// GPU probe of the PTX semantics the flash kernel and the CPU emulator (attention_emulator.h)
// assume: one warp runs ldmatrix.x4, ldmatrix.x4.trans and mma.m16n8k16 (through
// attention_ptx.cuh, with the lane addresses of attention_fragments.h) on a 16x16 tile of
// distinct integers, and every lane's registers are compared with the PTX ISA layouts as the
// emulator models them. If the flash tests fail on a device but the emulation tests pass, this
// test says which assumption is wrong. Label `gpu` (part of attention_gpu_test).
// Thread-safety: a test.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cuda/attention_fragments.h"
#include "kernels/cuda/attention_ptx.cuh"

namespace {

namespace attn = petal::cuda::attn;

constexpr int kPad = 24;  // smem row stride in elements (48 bytes: rows stay 16-byte aligned)

__global__ void PtxProbeKernel(const __nv_bfloat16* tile, uint32_t* plain, uint32_t* trans,
                               float* mma) {
  __shared__ __align__(16) __nv_bfloat16 s[16 * kPad];
  const int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) s[(i / 16) * kPad + i % 16] = tile[i];
  __syncwarp();
  const attn::FragCoord a = attn::LdsmA(lane);
  uint32_t r[4], rt[4];
  attn::LdMatrixX4(r, attn::SmemAddr(s + a.row * kPad + a.col));
  attn::LdMatrixX4Trans(rt, attn::SmemAddr(s + a.row * kPad + a.col));
  // C = A B with A = tile (rows 0-15) and B[k][n] = tile[n][k] (keys n = 0..7), as in Q K^T.
  const attn::FragCoord kb = attn::LdsmBKeyMajor(lane);
  uint32_t b[4];
  attn::LdMatrixX4(b, attn::SmemAddr(s + kb.row * kPad + kb.col));
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  attn::MmaBf16(c, r, b[0], b[1]);
  for (int i = 0; i < 4; ++i) {
    plain[lane * 4 + i] = r[i];
    trans[lane * 4 + i] = rt[i];
    mma[lane * 4 + i] = c[i];
  }
}

uint16_t Bf16Of(int v) {  // small integers are exact in bf16
  const float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

TEST(AttentionPtx, LdmatrixAndMmaMatchTheEmulatedLayouts) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
  std::vector<uint16_t> tile(256);
  for (int i = 0; i < 256; ++i) tile[i] = Bf16Of(i);  // element (r, c) holds 16 r + c
  __nv_bfloat16* d_tile;
  uint32_t *d_plain, *d_trans;
  float* d_mma;
  ASSERT_EQ(cudaMalloc(&d_tile, 512), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_plain, 512), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_trans, 512), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_mma, 512), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_tile, tile.data(), 512, cudaMemcpyHostToDevice), cudaSuccess);
  PtxProbeKernel<<<1, 32>>>(d_tile, d_plain, d_trans, d_mma);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<uint32_t> plain(128), trans(128);
  std::vector<float> mma(128);
  ASSERT_EQ(cudaMemcpy(plain.data(), d_plain, 512, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(trans.data(), d_trans, 512, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(mma.data(), d_mma, 512, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d_tile);
  cudaFree(d_plain);
  cudaFree(d_trans);
  cudaFree(d_mma);

  auto value = [&](int row, int col) { return uint32_t{tile[row * 16 + col]}; };
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 4; ++i) {
      // Plain: row lane/4 of matrix i (whose rows are addressed by lanes 8i..8i+7), columns
      // 2(lane%4) and +1; the lower column in the low half.
      const attn::FragCoord p = attn::LdsmA(8 * i + lane / 4);
      const uint32_t want =
          value(p.row, p.col + 2 * (lane % 4)) | value(p.row, p.col + 2 * (lane % 4) + 1) << 16;
      EXPECT_EQ(plain[lane * 4 + i], want) << "ldmatrix lane " << lane << " reg " << i;
      // Transposed: column lane/4 of matrix i, rows 2(lane%4) and +1.
      const attn::FragCoord t0 = attn::LdsmA(8 * i + 2 * (lane % 4));
      const attn::FragCoord t1 = attn::LdsmA(8 * i + 2 * (lane % 4) + 1);
      const uint32_t want_t = value(t0.row, t0.col + lane / 4) | value(t1.row, t1.col + lane / 4)
                                                                     << 16;
      EXPECT_EQ(trans[lane * 4 + i], want_t) << "ldmatrix.trans lane " << lane << " reg " << i;
    }
    for (int e = 0; e < 4; ++e) {
      const attn::FragCoord rc = attn::AccumCoord(lane, e);
      float want = 0.0f;
      for (int k = 0; k < 16; ++k) want += float(rc.row * 16 + k) * float(rc.col * 16 + k);
      EXPECT_EQ(mma[lane * 4 + e], want) << "mma lane " << lane << " element " << e;
    }
  }
}

}  // namespace
