// GPU tests of the ragged attention kernels (src/kernels/cuda/attention.h): the flash kernel and
// the reference kernel against petal::cpu::Attention (fp32) on bf16-rounded random inputs, each
// sequence alone vs in the batch, smaller batches under the same capacity config, CUDA-graph
// capture + replay, long sequences against the GPU reference. Label `gpu`; skipped without a
// device. Tolerance (bf16 output vs fp32 reference): max |out - ref| <= 2e-2 * max|ref| over the
// batch and cosine(out row, ref row) >= 0.9999 for every (token, head) row.
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

bool HasDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

// The shared host converter (round to nearest even).
uint16_t ToBf16(float f) { return petal::cpu::ToBf16Bits(f); }
float FromBf16(uint16_t b) { return petal::cpu::FromBf16Bits(b); }

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

Problem MakeProblem(Shape s, std::vector<int> lens, int max_tokens, int max_seqs, uint32_t seed) {
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

std::vector<float> CpuReference(const Problem& p) {
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
void ExpectMatches(const std::vector<uint16_t>& out, const std::vector<float>& ref,
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

std::vector<uint16_t> RunKernel(Device& dev, int variant, const AttentionParams& a) {
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
std::vector<int> FlashVariants(const Shape& s) {
  std::vector<int> v = {kDefault};
  for (int i = 0; i < petal::cuda::FlashVariantCount(s.d); ++i) {
    if (petal::cuda::FlashVariantSupports(s.d, i, s.hq / s.hkv)) v.push_back(i);
  }
  return v;
}

std::string VariantName(const Shape& s, int variant) {
  if (variant == kReference) return "reference";
  if (variant == kDefault) return "flash default";
  return "flash [" + petal::cuda::FlashVariantName(s.d, variant) + "]";
}

std::string Name(const Shape& s, const char* extra = "") {
  return "hq" + std::to_string(s.hq) + " hkv" + std::to_string(s.hkv) + " d" + std::to_string(s.d) +
         (s.causal ? " causal" : " bidir") + extra;
}

// ---- flash vs CPU over the full matrix of head dims, GQA ratios and masks ----

class FlashVsCpu : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(FlashVsCpu, MixedRaggedBatch) {
  if (!HasDevice()) GTEST_SKIP() << "no CUDA device";
  const auto [d, ratio, causal] = GetParam();
  const Shape s{2 * ratio, 2, d, causal};
  int tokens = 0;
  for (int l : kMixedLens) tokens += l;
  const int max_tokens = tokens + 37, max_seqs = static_cast<int>(kMixedLens.size()) + 3;
  Problem p = MakeProblem(s, kMixedLens, max_tokens, max_seqs, 1000 + d + ratio + causal);
  Device dev(s, max_tokens, max_seqs);
  const std::vector<float> ref = CpuReference(p);
  for (int variant : FlashVariants(s)) {
    const std::string what = VariantName(s, variant) + " " + Name(s);
    dev.Upload(p);
    dev.Poison();
    const std::vector<uint16_t> out = RunKernel(dev, variant, dev.Params());
    ExpectMatches(out, ref, p, what);

    // Same inputs again: identical bits (a race would show up as a difference).
    dev.Poison();
    EXPECT_TRUE(RunKernel(dev, variant, dev.Params()) == out) << what << ": not deterministic";

    // Each sequence alone (its rows at the same addresses, a one-sequence cu_seqlens, the same
    // capacity config) must give bit-identical rows.
    for (size_t i = 0; i < p.lens.size(); ++i) {
      if (p.lens[i] == 0) continue;
      Problem alone = p;
      alone.lens = {p.lens[i]};
      std::fill(alone.cu.begin(), alone.cu.end(), 0);
      alone.cu[1] = p.lens[i];
      dev.Upload(alone);
      dev.Poison();
      const std::vector<uint16_t> one = RunKernel(dev, variant, dev.Params(p.cu[i]));
      const size_t row = static_cast<size_t>(s.hq) * s.d;
      const bool same = std::equal(one.begin() + p.cu[i] * row, one.begin() + p.cu[i + 1] * row,
                                   out.begin() + p.cu[i] * row);
      EXPECT_TRUE(same) << what << ": sequence " << i << " (len " << p.lens[i]
                        << ") alone differs from the batch";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, FlashVsCpu,
                         ::testing::Combine(::testing::Values(32, 64, 128),
                                            ::testing::Values(1, 2, 4), ::testing::Bool()));

// ---- the reference kernel itself vs CPU ----

TEST(ReferenceAttention, MatchesCpu) {
  if (!HasDevice()) GTEST_SKIP() << "no CUDA device";
  for (int d : {32, 64, 128}) {
    for (bool causal : {false, true}) {
      const Shape s{4, 2, d, causal};
      const std::vector<int> lens = {0, 1, 17, 64, 129, 300, 0, 5};
      Problem p = MakeProblem(s, lens, 530, 10, 7 + d + causal);
      Device dev(s, 530, 10);
      dev.Upload(p);
      dev.Poison();
      ExpectMatches(RunKernel(dev, kReference, dev.Params()), CpuReference(p), p,
                    "reference " + Name(s));
    }
  }
}

// ---- graph safety ----

// A batch far smaller than the capacity, launched with the capacity-derived config; also with
// num_seqs = nullptr and the padding sequences empty.
TEST(FlashAttention, SmallBatchUnderLargeCapacity) {
  if (!HasDevice()) GTEST_SKIP() << "no CUDA device";
  const Shape s{16, 8, 128, false};
  const int max_tokens = 4096, max_seqs = 64;
  Device dev(s, max_tokens, max_seqs);
  Problem p = MakeProblem(s, {5, 0, 130}, max_tokens, max_seqs, 42);
  dev.Upload(p);
  dev.Poison();
  const auto ref = CpuReference(p);
  ExpectMatches(RunKernel(dev, kDefault, dev.Params()), ref, p, "small batch");

  for (int i = p.NumSeqs() + 1; i <= max_seqs; ++i) p.cu[i] = p.Tokens();  // empty padding
  dev.Upload(p);
  dev.Poison();
  AttentionParams a = dev.Params();
  a.num_seqs = nullptr;
  ExpectMatches(RunKernel(dev, kDefault, a), ref, p, "small batch, num_seqs=nullptr");

  Problem empty = MakeProblem(s, {}, max_tokens, max_seqs, 43);
  dev.Upload(empty);
  dev.Poison();
  ExpectMatches(RunKernel(dev, kDefault, dev.Params()), {}, empty, "empty batch");
}

// One capture, two different batches of the same capacity replayed through it.
TEST(FlashAttention, CudaGraphReplayWithDifferentBatches) {
  if (!HasDevice()) GTEST_SKIP() << "no CUDA device";
  for (bool causal : {false, true}) {
    const Shape s{8, 2, 64, causal};
    const int max_tokens = 1500, max_seqs = 8;
    Device dev(s, max_tokens, max_seqs);
    cudaStream_t stream;
    CUDA_ASSERT(cudaStreamCreate(&stream));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_ASSERT(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const petal::Status st = petal::cuda::LaunchRaggedAttention(dev.Params(), dev.ws.ptr, stream);
    CUDA_ASSERT(cudaStreamEndCapture(stream, &graph));
    STATUS_ASSERT(st);
    CUDA_ASSERT(cudaGraphInstantiate(&exec, graph, 0));
    const std::vector<std::vector<int>> batches = {{700, 3, 0, 64, 129}, {1, 1490}, {33}};
    for (size_t b = 0; b < batches.size(); ++b) {
      Problem p = MakeProblem(s, batches[b], max_tokens, max_seqs, 100 + b);
      dev.Upload(p);
      dev.Poison();
      CUDA_ASSERT(cudaGraphLaunch(exec, stream));
      CUDA_ASSERT(cudaStreamSynchronize(stream));
      ExpectMatches(dev.Download(), CpuReference(p), p,
                    "graph replay " + std::to_string(b) + " " + Name(s));
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

// ---- long sequences, against the GPU reference kernel ----

TEST(FlashAttention, LongSequencesVsGpuReference) {
  if (!HasDevice()) GTEST_SKIP() << "no CUDA device";
  struct Case {
    Shape s;
    std::vector<int> lens;
  };
  const std::vector<Case> cases = {{{16, 8, 128, false}, {8192}},
                                   {{16, 8, 128, true}, {8192}},
                                   {{2, 1, 64, true}, {32768}},
                                   {{2, 1, 32, false}, {20000, 12768}}};
  for (const Case& c : cases) {
    int tokens = 0;
    for (int l : c.lens) tokens += l;
    Problem p = MakeProblem(c.s, c.lens, tokens, static_cast<int>(c.lens.size()), 5 + tokens);
    Device dev(c.s, tokens, p.max_seqs);
    dev.Upload(p);
    dev.Poison();
    const auto ref_bits = RunKernel(dev, kReference, dev.Params());
    std::vector<float> ref(ref_bits.size());
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = FromBf16(ref_bits[i]);
    for (int variant : FlashVariants(c.s)) {
      dev.Poison();
      ExpectMatches(RunKernel(dev, variant, dev.Params()), ref, p,
                    "long " + VariantName(c.s, variant) + " " +
                        Name(c.s, (" T=" + std::to_string(tokens)).c_str()));
    }
  }
}

// ---- argument checks ----

TEST(FlashAttention, RejectsUnsupportedShapes) {
  AttentionParams a;
  a.max_tokens = 16;
  a.max_seqs = 1;
  a.num_heads = 4;
  a.num_kv_heads = 2;
  a.head_dim = 96;
  a.scale = 0.1f;
  alignas(16) static __nv_bfloat16 dummy[8];
  static int32_t cu[2];
  a.q = a.k = a.v = dummy;
  a.out = dummy;
  a.cu_seqlens = cu;
  a.q_stride = a.k_stride = a.v_stride = 4 * 96;
  petal::Status st = petal::cuda::ValidateAttentionParams(a);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("96"), std::string::npos) << st.message();
  a.head_dim = 64;
  a.num_kv_heads = 3;
  EXPECT_FALSE(petal::cuda::ValidateAttentionParams(a).ok());
  a.num_kv_heads = 2;
  a.q_stride = a.k_stride = a.v_stride = 4 * 64;
  EXPECT_TRUE(petal::cuda::ValidateAttentionParams(a).ok());
}

}  // namespace

// ---- the cuDNN backend (attention_cudnn.h) vs CPU, on the engine's layout and padding ----

namespace {

// Runs cuDNN's fused attention on dev's batch the way AttentionRunner does: metadata kernel,
// plan for (max_seqs, max_seqlen), run. An error status if cuDNN is missing or refuses.
petal::Status RunCudnn(Device& dev, const AttentionParams& a, int max_seqlen,
                       std::vector<uint16_t>* out) {
  static auto cudnn = petal::cuda::CudnnAttention::Create(nullptr);
  if (!cudnn.ok()) return cudnn.status();
  petal::cuda::CudnnAttention& c = **cudnn;
  PETAL_RETURN_IF_ERROR(c.Prepare(a, max_seqlen));
  DevBuf<char> meta_storage(petal::cuda::CudnnAttentionMetaBytes(a.max_seqs));
  DevBuf<char> ws(std::max<size_t>(c.WorkspaceBytes(), 1));
  const auto meta = petal::cuda::CarveCudnnAttentionMeta(meta_storage.ptr, a.max_seqs);
  petal::Status st = petal::cuda::LaunchCudnnAttentionMeta(a, meta, nullptr);
  if (st.ok()) st = c.Run(a, max_seqlen, meta, ws.ptr, nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  *out = dev.Download();
  return petal::Status::Ok();
}

}  // namespace

class CudnnVsCpu : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(CudnnVsCpu, MixedRaggedBatch) {
  if (!HasDevice()) GTEST_SKIP() << "no CUDA device";
  const auto [d, ratio, causal] = GetParam();
  const Shape s{4 * ratio, 4, d, causal};
  int tokens = 0, longest = 0;
  for (int l : kMixedLens) tokens += l, longest = std::max(longest, l);
  const int max_tokens = tokens + 37, max_seqs = static_cast<int>(kMixedLens.size()) + 3;
  Problem p = MakeProblem(s, kMixedLens, max_tokens, max_seqs, 2000 + d + ratio + causal);
  Device dev(s, max_tokens, max_seqs);
  const std::vector<float> ref = CpuReference(p);
  // The exact longest length and the engine's power-of-two bucket above it.
  for (int max_seqlen : {longest, 4096}) {
    dev.Upload(p);
    dev.Poison();
    std::vector<uint16_t> out;
    const petal::Status st = RunCudnn(dev, dev.Params(), max_seqlen, &out);
    // Only an environment without cuDNN (or without sm_90) may skip; otherwise every shape here
    // must run.
    if (st.code() == petal::StatusCode::kUnavailable) GTEST_SKIP() << st.ToString();
    ASSERT_TRUE(st.ok()) << "cuDNN refused " << Name(s) << ": " << st.ToString();
    ExpectMatches(out, ref, p, "cudnn max_seqlen " + std::to_string(max_seqlen) + " " + Name(s));
  }
}

INSTANTIATE_TEST_SUITE_P(All, CudnnVsCpu,
                         ::testing::Combine(::testing::Values(64, 128), ::testing::Values(1, 2, 4),
                                            ::testing::Bool()));
