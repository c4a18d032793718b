// GPU tests of the ragged attention kernels (src/kernels/cuda/attention.h): the flash kernel and
// the reference kernel against petal::cpu::Attention (fp32) on bf16-rounded random inputs, each
// sequence alone vs in the batch, smaller batches under the same capacity config, CUDA-graph
// capture + replay, long sequences against the GPU reference; the cuDNN backend is in
// attention_cudnn_gpu_test.cu. Label `gpu`; skipped without a device. Tolerance: see
// attention_test_util.cuh.
#include "attention_test_util.cuh"

namespace {

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
