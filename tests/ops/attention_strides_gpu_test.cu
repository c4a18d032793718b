// GPU test of the attention API's layout generality: q, k and v in three separate buffers with
// different, padded row strides (not the fused QKV layout the other tests use), every flash
// variant and the reference kernel vs petal::cpu::Attention. Same tolerance as
// attention_gpu_test.cu. Label `gpu` (part of attention_gpu_test). Thread-safety: a test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_internal.h"

namespace {

uint16_t Bf16(float f) { return petal::cpu::ToBf16Bits(f); }  // the shared host converter
float F32(uint16_t b) { return petal::cpu::FromBf16Bits(b); }

TEST(AttentionStrides, SeparateBuffersWithPaddedStrides) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
  const int hq = 8, hkv = 2, d = 64;
  const std::vector<int> lens = {70, 0, 5, 130};
  std::vector<int32_t> cu = {0};
  for (int l : lens) cu.push_back(cu.back() + l);
  const int tokens = cu.back(), seqs = static_cast<int>(lens.size());
  // Strides in elements, multiples of 8 and larger than the heads they hold.
  const int q_stride = hq * d + 24, k_stride = hkv * d + 8, v_stride = hkv * d + 40;
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> qk(-2.0f, 2.0f), vd(-1.0f, 1.0f);
  auto fill = [&](int stride, bool is_v) {
    std::vector<uint16_t> h(static_cast<size_t>(tokens) * stride);
    for (auto& x : h) x = Bf16(is_v ? vd(rng) : qk(rng));
    return h;
  };
  const std::vector<uint16_t> hq_buf = fill(q_stride, false), hk_buf = fill(k_stride, false),
                              hv_buf = fill(v_stride, true);
  auto to_f32 = [](const std::vector<uint16_t>& h) {
    std::vector<float> f(h.size());
    for (size_t i = 0; i < h.size(); ++i) f[i] = F32(h[i]);
    return f;
  };
  const std::vector<float> fq = to_f32(hq_buf), fk = to_f32(hk_buf), fv = to_f32(hv_buf);

  void *dq, *dk, *dv, *dout, *dcu, *dws;
  const size_t out_elems = static_cast<size_t>(tokens) * hq * d;
  ASSERT_EQ(cudaMalloc(&dq, hq_buf.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dk, hk_buf.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dv, hv_buf.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dout, out_elems * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dcu, cu.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dws, petal::cuda::AttentionWorkspaceBytes(tokens, seqs)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dq, hq_buf.data(), hq_buf.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dk, hk_buf.data(), hk_buf.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dv, hv_buf.data(), hv_buf.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dcu, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);

  for (bool causal : {false, true}) {
    std::vector<float> ref(out_elems);
    petal::cpu::Attention(fq.data(), q_stride, fk.data(), k_stride, fv.data(), v_stride, ref.data(),
                          cu.data(), seqs, hq, hkv, d, causal,
                          1.0f / std::sqrt(static_cast<float>(d)));
    petal::cuda::AttentionParams p;
    p.q = static_cast<const __nv_bfloat16*>(dq);
    p.k = static_cast<const __nv_bfloat16*>(dk);
    p.v = static_cast<const __nv_bfloat16*>(dv);
    p.q_stride = q_stride;
    p.k_stride = k_stride;
    p.v_stride = v_stride;
    p.out = static_cast<__nv_bfloat16*>(dout);
    p.cu_seqlens = static_cast<const int32_t*>(dcu);
    p.num_seqs = nullptr;  // all max_seqs sequences
    p.max_tokens = tokens;
    p.max_seqs = seqs;
    p.num_heads = hq;
    p.num_kv_heads = hkv;
    p.head_dim = d;
    p.causal = causal;
    p.scale = 1.0f / std::sqrt(static_cast<float>(d));
    for (int v = -1; v < petal::cuda::FlashVariantCount(d); ++v) {  // -1: reference kernel
      if (v >= 0 && !petal::cuda::FlashVariantSupports(d, v, hq / hkv)) continue;
      ASSERT_EQ(cudaMemset(dout, 0xFF, out_elems * 2), cudaSuccess);
      const petal::Status st = v < 0
                                   ? petal::cuda::LaunchReferenceAttention(p, nullptr)
                                   : petal::cuda::LaunchRaggedAttentionVariant(p, v, dws, nullptr);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint16_t> out(out_elems);
      ASSERT_EQ(cudaMemcpy(out.data(), dout, out_elems * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      const std::string what =
          (v < 0 ? std::string("reference") : petal::cuda::FlashVariantName(d, v)) +
          (causal ? " causal" : " bidir");
      double err = 0.0, ref_max = 0.0, cos_min = 1.0;
      for (size_t r = 0; r < out_elems / d; ++r) {
        double dot = 0, oo = 0, rr = 0;
        for (int i = 0; i < d; ++i) {
          const double o = F32(out[r * d + i]), x = ref[r * d + i];
          ASSERT_TRUE(std::isfinite(o)) << what << ": row " << r << " not written";
          dot += o * x, oo += o * o, rr += x * x;
          err = std::max(err, std::fabs(o - x));
          ref_max = std::max(ref_max, std::fabs(x));
        }
        cos_min = std::min(cos_min, dot / std::sqrt(oo * rr + 1e-30));
      }
      EXPECT_GE(cos_min, 0.9999) << what;
      EXPECT_LE(err, 2e-2 * ref_max) << what;
    }
  }
  cudaFree(dq);
  cudaFree(dk);
  cudaFree(dv);
  cudaFree(dout);
  cudaFree(dcu);
  cudaFree(dws);
}

}  // namespace
