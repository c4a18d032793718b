// GPU test of the flash kernel's q/k norm + rotary prologue (AttentionParams::qk_norm, issue 32):
// on the Qwen3-0.6B head layout (16 q heads, 8 kv heads, head_dim 128, fused QKV rows), every
// flash variant with the prologue against LaunchQkNormRope in place followed by the same variant
// without it (the model's path before). The prologue repeats that kernel's arithmetic, so the
// outputs should agree to the bit; the test allows one bf16 rounding step (2^-8 relative) and
// prints how many values differ. The q/k rows in global memory must stay as they were. Both
// masks. Label `gpu` (part of attention_gpu_test). Thread-safety: a test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_internal.h"
#include "kernels/cuda/ops.h"

namespace {

uint16_t Bf16(float f) { return petal::cpu::ToBf16Bits(f); }
float F32(uint16_t b) { return petal::cpu::FromBf16Bits(b); }

template <class T>
T* Upload(const std::vector<T>& h) {
  void* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, h.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return static_cast<T*>(d);
}

template <class T>
std::vector<T> Download(const T* d, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

TEST(AttentionQkNorm, PrologueMatchesSeparateKernel) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
  const int hq = 16, hkv = 8, d = 128, row = (hq + 2 * hkv) * d;
  const std::vector<int> lens = {70, 0, 5, 130, 64, 1};
  std::vector<int32_t> cu = {0}, positions;
  for (int l : lens) {
    for (int i = 0; i < l; ++i) positions.push_back(i);
    cu.push_back(cu.back() + l);
  }
  const int tokens = cu.back(), seqs = static_cast<int>(lens.size());
  std::mt19937 rng(32);
  std::uniform_real_distribution<float> x(-2.0f, 2.0f), w(0.5f, 1.5f);
  std::vector<uint16_t> qkv(static_cast<size_t>(tokens) * row), qw(d), kw(d);
  for (auto& v : qkv) v = Bf16(x(rng));
  for (int i = 0; i < d; ++i) qw[i] = Bf16(w(rng)), kw[i] = Bf16(w(rng));
  const int rope_rows = 256;
  const std::vector<float2> rope = petal::cuda::RopeTable(rope_rows, d, 1e6);

  auto* raw = Upload(qkv);  // stays as the QKV GEMM wrote it
  auto* normed = Upload(qkv);
  auto* dqw = Upload(qw);
  auto* dkw = Upload(kw);
  auto* dpos = Upload(positions);
  auto* drope = Upload(rope);
  auto* dcu = Upload(cu);
  const size_t out_elems = static_cast<size_t>(tokens) * hq * d;
  uint16_t *out_a = nullptr, *out_b = nullptr;
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&out_a, out_elems * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out_b, out_elems * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ws, petal::cuda::AttentionWorkspaceBytes(tokens, seqs)), cudaSuccess);

  // The model's path before: the norm in place, then attention.
  petal::cuda::QkNormRopeParams rp;
  rp.qkv = reinterpret_cast<__nv_bfloat16*>(normed);
  rp.rows = tokens;
  rp.row_stride = row;
  rp.num_q_heads = hq;
  rp.num_kv_heads = hkv;
  rp.head_dim = d;
  rp.q_norm_weight = reinterpret_cast<const __nv_bfloat16*>(dqw);
  rp.k_norm_weight = reinterpret_cast<const __nv_bfloat16*>(dkw);
  rp.eps = 1e-6f;
  rp.positions = dpos;
  rp.rope_table = drope;
  rp.rope_table_rows = rope_rows;
  ASSERT_TRUE(petal::cuda::LaunchQkNormRope(rp, nullptr).ok());

  auto params = [&](const uint16_t* base, uint16_t* out, bool causal) {
    petal::cuda::AttentionParams p;
    const auto* b = reinterpret_cast<const __nv_bfloat16*>(base);
    p.q = b;
    p.k = b + hq * d;
    p.v = b + (hq + hkv) * d;
    p.q_stride = p.k_stride = p.v_stride = row;
    p.out = reinterpret_cast<__nv_bfloat16*>(out);
    p.cu_seqlens = dcu;
    p.max_tokens = tokens;
    p.max_seqs = seqs;
    p.num_heads = hq;
    p.num_kv_heads = hkv;
    p.head_dim = d;
    p.causal = causal;
    p.scale = 1.0f / std::sqrt(static_cast<float>(d));
    return p;
  };
  for (bool causal : {false, true}) {
    petal::cuda::AttentionParams before = params(normed, out_a, causal);
    petal::cuda::AttentionParams fused = params(raw, out_b, causal);
    fused.qk_norm = {rp.q_norm_weight, rp.k_norm_weight, rp.eps, dpos, drope, rope_rows};
    ASSERT_TRUE(petal::cuda::FlashFoldsQkNorm(fused));
    for (int v = 0; v < petal::cuda::FlashVariantCount(d); ++v) {
      if (!petal::cuda::FlashVariantSupports(d, v, hq / hkv)) continue;
      const std::string what =
          petal::cuda::FlashVariantName(d, v) + (causal ? " causal" : " bidir");
      ASSERT_EQ(cudaMemset(out_a, 0xFF, out_elems * 2), cudaSuccess);  // NaN: unwritten shows
      ASSERT_EQ(cudaMemset(out_b, 0xFF, out_elems * 2), cudaSuccess);
      ASSERT_TRUE(petal::cuda::LaunchRaggedAttentionVariant(before, v, ws, nullptr).ok()) << what;
      ASSERT_TRUE(petal::cuda::LaunchRaggedAttentionVariant(fused, v, ws, nullptr).ok()) << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      const std::vector<uint16_t> a = Download(out_a, out_elems), b = Download(out_b, out_elems);
      size_t differ = 0;
      double worst = 0;
      for (size_t i = 0; i < out_elems; ++i) {
        const double fa = F32(a[i]), fb = F32(b[i]);
        ASSERT_TRUE(std::isfinite(fa) && std::isfinite(fb)) << what << ": value " << i;
        if (a[i] != b[i]) ++differ;
        worst = std::max(worst, std::fabs(fa - fb) / std::max(std::fabs(fa), 1e-3));
      }
      EXPECT_LE(worst, 1.0 / 256) << what;
      std::printf(
          "  %s: %zu of %zu values differ from the separate kernel's, worst relative %.3g\n",
          what.c_str(), differ, out_elems, worst);
    }
  }
  EXPECT_EQ(Download(raw, qkv.size()), qkv) << "the prologue wrote to q/k in global memory";
  // Not for other head dims or without a rope table: the caller must run the norm first.
  petal::cuda::AttentionParams bad = params(raw, out_b, false);
  bad.qk_norm = {rp.q_norm_weight, rp.k_norm_weight, rp.eps, dpos, nullptr, 0};
  EXPECT_FALSE(petal::cuda::FlashFoldsQkNorm(bad));
  EXPECT_FALSE(petal::cuda::LaunchRaggedAttention(bad, ws, nullptr).ok());
  for (void* p :
       {static_cast<void*>(raw), static_cast<void*>(normed), static_cast<void*>(dqw),
        static_cast<void*>(dkw), static_cast<void*>(dpos), static_cast<void*>(drope),
        static_cast<void*>(dcu), static_cast<void*>(out_a), static_cast<void*>(out_b), ws}) {
    cudaFree(p);
  }
}

}  // namespace
