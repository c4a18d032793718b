// GPU tests of the cuDNN attention backend (src/kernels/cuda/attention_cudnn.h) against
// petal::cpu::Attention on the engine's layout and padding, at the exact longest length and the
// engine's power-of-two bucket above it. Same problems and tolerance as attention_gpu_test.cu
// (attention_test_util.cuh). Label `gpu`; skipped without a device or without cuDNN.
#include "attention_test_util.cuh"

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
  const petal::Status meta_st = petal::cuda::LaunchCudnnAttentionMeta(a, meta, nullptr);
  const petal::Status st = meta_st.ok() ? c.Run(a, max_seqlen, meta, ws.ptr, nullptr) : meta_st;
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
