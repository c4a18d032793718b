// Shared set-up of the ragged attention GPU tests (attention_gpu_test.cu,
// attention_cudnn_gpu_test.cu): random bf16 problems with padded cu_seqlens, the CPU reference,
// device buffers sized for a capacity, the stated tolerance check, and kernel / variant runners.
// Tolerance (bf16 output vs fp32 reference): max |out - ref| <= 2e-2 * max|ref| over the batch and
// cosine(out row, ref row) >= 0.9999 for every (token, head) row; rows past the batch stay
// poisoned. Everything here has internal linkage: each test file gets its own copy.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/attention_internal.h"

namespace {

using petal::cuda::AttentionParams;

constexpr uint16_t kPoison = 0xFFFF;  // a bf16 NaN: unwritten rows stay NaN and fail any check
constexpr double kMaxAbsRel = 2e-2;
constexpr double kMinCosine = 0.9999;
const std::vector<int> kMixedLens = {0,   1,   15,  16,   17,   63, 64, 65, 127,
                                     128, 129, 300, 1000, 2049, 0,  7,  0};

#define CUDA_ASSERT(expr) ASSERT_EQ((expr), cudaSuccess) << #expr
#define STATUS_ASSERT(expr)                                   \
  do {                                                        \
    const petal::Status st_ = (expr);                         \
    ASSERT_TRUE(st_.ok()) << #expr << ": " << st_.ToString(); \
  } while (0)

inline bool HasDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// The shared host converter (round to nearest even).
inline uint16_t ToBf16(float f) { return petal::cpu::ToBf16Bits(f); }
inline float FromBf16(uint16_t b) { return petal::cpu::FromBf16Bits(b); }

struct Shape {
  int hq, hkv, d;
  bool causal;
};

// One batch on the host: fused QKV rows [max_tokens, (hq + 2 hkv) d] and cu_seqlens padded to
// max_seqs + 1 with garbage past the batch (the kernels must ignore it).
struct Problem {
  Shape s;
  int max_tokens = 0, max_seqs = 0;
  std::vector<int> lens;
  std::vector<uint16_t> qkv;
  std::vector<int32_t> cu;
  int64_t Row() const { return static_cast<int64_t>(s.hq + 2 * s.hkv) * s.d; }
  int Tokens() const { return cu[lens.size()]; }
  int NumSeqs() const { return static_cast<int>(lens.size()); }
};

inline Problem MakeProblem(Shape s, std::vector<int> lens, int max_tokens, int max_seqs,
                           uint32_t seed) {
  Problem p;
  p.s = s;
  p.lens = std::move(lens);
  p.max_tokens = max_tokens;
  p.max_seqs = max_seqs;
  p.cu.assign(max_seqs + 1, 0);
  for (size_t i = 0; i < p.lens.size(); ++i) p.cu[i + 1] = p.cu[i] + p.lens[i];
  for (int i = p.NumSeqs() + 1; i <= max_seqs; ++i) p.cu[i] = 1 << 30;  // garbage
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> qk(-2.0f, 2.0f), v(-1.0f, 1.0f);
  p.qkv.resize(static_cast<size_t>(max_tokens) * p.Row());
  const int64_t v0 = static_cast<int64_t>(s.hq + s.hkv) * s.d;
  for (int64_t t = 0; t < max_tokens; ++t) {
    for (int64_t c = 0; c < p.Row(); ++c) {
      p.qkv[t * p.Row() + c] = ToBf16(c < v0 ? qk(rng) : v(rng));
    }
  }
  return p;
}

inline std::vector<float> CpuReference(const Problem& p) {
  std::vector<float> f(p.qkv.size());
  for (size_t i = 0; i < f.size(); ++i) f[i] = FromBf16(p.qkv[i]);
  const int row = static_cast<int>(p.Row()), hq = p.s.hq, hkv = p.s.hkv, d = p.s.d;
  std::vector<float> out(static_cast<size_t>(p.Tokens()) * hq * d, 0.0f);
  petal::cpu::Attention(f.data(), row, f.data() + hq * d, row, f.data() + (hq + hkv) * d, row,
                        out.data(), p.cu.data(), p.NumSeqs(), hq, hkv, d, p.s.causal,
                        1.0f / std::sqrt(static_cast<float>(d)));
  return out;
}

template <class T>
struct DevBuf {
  T* ptr = nullptr;
  explicit DevBuf(size_t n) {
    EXPECT_EQ(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)), cudaSuccess);
  }
  ~DevBuf() { cudaFree(ptr); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

// Device buffers sized for a capacity; reused across batches like an engine would.
struct Device {
  Shape s;
  int max_tokens, max_seqs;
  DevBuf<uint16_t> qkv, out;
  DevBuf<int32_t> cu, nseq;
  DevBuf<char> ws;
  Device(Shape shape, int mt, int ms)
      : s(shape),
        max_tokens(mt),
        max_seqs(ms),
        qkv(static_cast<size_t>(mt) * (shape.hq + 2 * shape.hkv) * shape.d),
        out(static_cast<size_t>(mt) * shape.hq * shape.d),
        cu(ms + 1),
        nseq(1),
        ws(petal::cuda::AttentionWorkspaceBytes(mt, ms)) {}

  void Upload(const Problem& p) {
    ASSERT_EQ(p.max_tokens, max_tokens);
    ASSERT_EQ(p.max_seqs, max_seqs);
    CUDA_ASSERT(cudaMemcpy(qkv.ptr, p.qkv.data(), p.qkv.size() * 2, cudaMemcpyHostToDevice));
    CUDA_ASSERT(cudaMemcpy(cu.ptr, p.cu.data(), p.cu.size() * 4, cudaMemcpyHostToDevice));
    const int32_t n = p.NumSeqs();
    CUDA_ASSERT(cudaMemcpy(nseq.ptr, &n, 4, cudaMemcpyHostToDevice));
  }
  void Poison() {
    ASSERT_EQ(cudaMemset(out.ptr, 0xFF, static_cast<size_t>(max_tokens) * s.hq * s.d * 2),
              cudaSuccess);
  }
  // Params over the whole buffer; `row_offset` shifts q/k/v/out (to run one sequence alone).
  AttentionParams Params(int row_offset = 0) const {
    const int64_t row = static_cast<int64_t>(s.hq + 2 * s.hkv) * s.d;
    const auto* base = reinterpret_cast<const __nv_bfloat16*>(qkv.ptr) + row_offset * row;
    AttentionParams a;
    a.q = base;
    a.k = base + s.hq * s.d;
    a.v = base + (s.hq + s.hkv) * s.d;
    a.q_stride = a.k_stride = a.v_stride = row;
    a.out =
        reinterpret_cast<__nv_bfloat16*>(out.ptr) + static_cast<int64_t>(row_offset) * s.hq * s.d;
    a.cu_seqlens = cu.ptr;
    a.num_seqs = nseq.ptr;
    a.max_tokens = max_tokens;
    a.max_seqs = max_seqs;
    a.num_heads = s.hq;
    a.num_kv_heads = s.hkv;
    a.head_dim = s.d;
    a.causal = s.causal;
    a.scale = 1.0f / std::sqrt(static_cast<float>(s.d));
    return a;
  }
  std::vector<uint16_t> Download() const {
    std::vector<uint16_t> h(static_cast<size_t>(max_tokens) * s.hq * s.d);
    EXPECT_EQ(cudaMemcpy(h.data(), out.ptr, h.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

// Checks out (bf16, [max_tokens, hq, d]) against ref (fp32, [tokens, hq, d]): the stated
// tolerance on every row of the batch, and rows past the batch left poisoned.
inline void ExpectMatches(const std::vector<uint16_t>& out, const std::vector<float>& ref,
                          const Problem& p, const std::string& what) {
  const int hq = p.s.hq, d = p.s.d, tokens = p.Tokens();
  double ref_max = 0.0, err_max = 0.0, cos_min = 1.0;
  int bad_rows = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(tokens) * hq * d; ++i) {
    ref_max = std::max(ref_max, std::fabs(static_cast<double>(ref[i])));
  }
  for (int tok = 0; tok < tokens; ++tok) {
    for (int h = 0; h < hq; ++h) {
      const int64_t base = (static_cast<int64_t>(tok) * hq + h) * d;
      double dot = 0, nn = 0, rr = 0;
      bool finite = true;
      for (int i = 0; i < d; ++i) {
        const double o = FromBf16(out[base + i]), r = ref[base + i];
        finite = finite && std::isfinite(o);
        dot += o * r;
        nn += o * o;
        rr += r * r;
        err_max = std::max(err_max, std::fabs(o - r));
      }
      const double cosine = finite ? dot / std::sqrt(nn * rr + 1e-30) : -1.0;
      cos_min = std::min(cos_min, cosine);
      if (cosine < kMinCosine && ++bad_rows <= 5) {
        ADD_FAILURE() << what << ": token " << tok << " head " << h << " cosine " << cosine
                      << (finite ? "" : " (non-finite output: unwritten or NaN)");
      }
    }
  }
  EXPECT_EQ(bad_rows, 0) << what << ": rows below cosine " << kMinCosine;
  EXPECT_TRUE(std::isfinite(err_max));
  EXPECT_LE(err_max, kMaxAbsRel * ref_max)
      << what << ": max abs error " << err_max << " vs max|ref| " << ref_max;
  int64_t touched = 0;
  for (int64_t i = static_cast<int64_t>(tokens) * hq * d; i < static_cast<int64_t>(out.size());
       ++i) {
    touched += out[i] != kPoison;
  }
  EXPECT_EQ(touched, 0) << what << ": wrote outside the batch's rows";
  std::printf("  %s: tokens %d, max abs err %.3g (max|ref| %.3g), min cosine %.7f\n", what.c_str(),
              tokens, err_max, ref_max, cos_min);
}

constexpr int kReference = -2;  // "variant" that selects the reference kernel
constexpr int kDefault = -1;    // the public API (default flash variant)

inline std::vector<uint16_t> RunKernel(Device& dev, int variant, const AttentionParams& a) {
  petal::Status st =
      variant == kReference ? petal::cuda::LaunchReferenceAttention(a, nullptr)
      : variant == kDefault
          ? petal::cuda::LaunchRaggedAttention(a, dev.ws.ptr, nullptr)
          : petal::cuda::LaunchRaggedAttentionVariant(a, variant, dev.ws.ptr, nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return dev.Download();
}

// kDefault plus every compiled flash variant that supports the shape's GQA group.
inline std::vector<int> FlashVariants(const Shape& s) {
  std::vector<int> v = {kDefault};
  for (int i = 0; i < petal::cuda::FlashVariantCount(s.d); ++i) {
    if (petal::cuda::FlashVariantSupports(s.d, i, s.hq / s.hkv)) v.push_back(i);
  }
  return v;
}

inline std::string VariantName(const Shape& s, int variant) {
  if (variant == kReference) return "reference";
  if (variant == kDefault) return "flash default";
  return "flash [" + petal::cuda::FlashVariantName(s.d, variant) + "]";
}

inline std::string Name(const Shape& s, const char* extra = "") {
  return "hq" + std::to_string(s.hq) + " hkv" + std::to_string(s.hkv) + " d" + std::to_string(s.d) +
         (s.causal ? " causal" : " bidir") + extra;
}

}  // namespace
