// GPU model-level checks (label gpu): the CUDA engine against the CPU fp32 engine on ragged
// batches, for every model folder it is given: the committed tiny Qwen3 fixtures and any folders
// named in PETAL_GPU_TEST_MODELS (colon-separated; the GPU run script passes the real models);
// the ragged-batch and graph checks also run two random `qwen3-small-d64` models made at start
// (head_dim 64: the forward folds its RMSNorms into the GEMMs; with and without biases).
// Tolerance: cosine >= 0.999 per embedding (the design brief's 0.1% rule).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <random>
#include <sstream>

#include <unistd.h>

#include "engine/cpu_engine.h"
#include "engine/cuda/cuda_engine.h"
#include "model/make_model.h"
#include "wire/codec.h"

// Host allocations through operator new, counted on a thread while it sets g_count_news (the
// warm-step test below); every other use of new is untouched.
namespace {
thread_local bool g_count_news = false;
std::atomic<int> g_news{0};
}  // namespace
void* operator new(size_t n) {
  if (g_count_news) g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return ::operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace petal {
namespace {

std::vector<std::string> ModelDirs() {
  std::vector<std::string> dirs;
  const char* src = std::getenv("PETAL_SOURCE_DIR");
  std::string root = src ? src : ".";
  for (const char* name : {"tests/fixtures/qwen3-tiny-bidir", "tests/fixtures/qwen3-tiny-causal"}) {
    if (std::filesystem::exists(root + "/" + name + "/config.json"))
      dirs.push_back(root + "/" + name);
  }
  if (const char* extra = std::getenv("PETAL_GPU_TEST_MODELS")) {
    std::stringstream ss(extra);
    for (std::string d; std::getline(ss, d, ':');) {
      if (!d.empty()) dirs.push_back(d);
    }
  }
  return dirs;
}

// The two generated `qwen3-small-d64` models (bidirectional without biases, causal with q/k/v/o
// biases), made once per process in the temp folder (MakeModel is deterministic for its seed).
const std::vector<std::string>& FoldedModelDirs() {
  static const std::vector<std::string> made = [] {
    std::vector<std::string> out;
    for (bool bias : {false, true}) {
      MakeModelOptions mo;
      mo.shape = "qwen3-small-d64";
      mo.seed = bias ? 7 : 3;
      mo.attention_bias = bias;
      mo.mask = bias ? AttentionMask::kCausal : AttentionMask::kBidirectional;
      mo.out_dir = std::filesystem::temp_directory_path().string() + "/petal_cuda_engine_test_d64" +
                   (bias ? "_bias" : "") + "_" + std::to_string(getpid());
      if (MakeModel(mo).ok()) out.push_back(mo.out_dir);
    }
    setenv("PETAL_FOLD_NORMS", "1", 1);  // the fold is opt-in; engines made after this take it
    return out;
  }();
  return made;
}

std::vector<std::string> WithFolded(std::vector<std::string> dirs) {
  dirs.insert(dirs.end(), FoldedModelDirs().begin(), FoldedModelDirs().end());
  return dirs;
}

Batch RandomBatch(const std::vector<int>& lens, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tok(0, vocab - 1);
  Batch b;
  b.cu_seqlens.push_back(0);
  for (int len : lens) {
    std::vector<int32_t> ids(len);
    for (auto& t : ids) t = tok(rng);
    b.Add(ids);
  }
  return b;
}

class CudaEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device";
    if (ModelDirs().empty()) GTEST_SKIP() << "no model folders";
  }
};

TEST_F(CudaEngineTest, MatchesCpuOnRaggedBatches) {
  EXPECT_EQ(FoldedModelDirs().size(), 2u) << "could not make the qwen3-small-d64 models";
  for (const auto& dir : WithFolded(ModelDirs())) {
    SCOPED_TRACE(dir);
    auto cpu = CpuEngine::Load(dir, {.precision = "reference"});
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    CudaEngineOptions opt;
    opt.max_tokens = 4096;
    opt.max_seqs = 64;
    auto gpu = CreateCudaEngine(dir, opt);
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    const int max_len = (*cpu)->config().max_seq_length;
    std::vector<int> lens = {1, 7, 0, 64, 129, 300, 2, 511};
    for (auto& l : lens) l = std::min(l, max_len);
    Batch batch = RandomBatch(lens, (*cpu)->config().vocab_size, 42);
    auto ref = (*cpu)->Embed(batch);
    auto got = (*gpu)->Embed(batch);
    ASSERT_TRUE(ref.ok() && got.ok()) << got.status().ToString();
    double worst = 1;
    for (int r = 0; r < got->rows; ++r) {
      if (batch.seq_len(r) == 0) {
        for (int i = 0; i < got->dim; ++i) EXPECT_EQ(got->row(r)[i], 0.0f);
        continue;
      }
      const double c = wire::CosineSimilarity(got->row(r), ref->row(r), got->dim);
      worst = std::min(worst, c);
      EXPECT_GE(c, 0.999) << "row " << r << " len " << batch.seq_len(r);
    }
    std::printf("[cuda vs cpu] %s: worst cosine %.6f over %d sequences\n", dir.c_str(), worst,
                got->rows);
    // Each sequence alone gives the same embedding as inside the ragged batch.
    for (int r = 0; r < batch.num_seqs(); ++r) {
      if (batch.seq_len(r) == 0) continue;
      Batch one;
      one.Add(std::vector<int32_t>(batch.token_ids.begin() + batch.cu_seqlens[r],
                                   batch.token_ids.begin() + batch.cu_seqlens[r + 1]));
      auto alone = (*gpu)->Embed(one);
      ASSERT_TRUE(alone.ok());
      EXPECT_GE(wire::CosineSimilarity(alone->row(0), got->row(r), got->dim), 0.9999)
          << "row " << r;
    }
  }
}

TEST_F(CudaEngineTest, HandlesInFlightAndCapacityErrors) {
  const std::string dir = ModelDirs().front();
  CudaEngineOptions opt;
  opt.max_tokens = 512;
  opt.max_seqs = 8;
  auto gpu = CreateCudaEngine(dir, opt);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  const int vocab = (*gpu)->config().vocab_size;
  Batch a = RandomBatch({5, 9}, vocab, 1), b = RandomBatch({33}, vocab, 2);
  auto ea = (*gpu)->Embed(a), eb = (*gpu)->Embed(b);
  ASSERT_TRUE(ea.ok() && eb.ok());
  // Two batches in flight, waited on in reverse order: each gets its own result.
  auto ha = (*gpu)->Step(a);
  auto hb = (*gpu)->Step(b);
  ASSERT_TRUE(ha.ok() && hb.ok());
  auto rb = (*hb)->Wait();
  auto ra = (*ha)->Wait();
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra->data, ea->data);
  EXPECT_EQ(rb->data, eb->data);
  // Over capacity: a clear error, and the engine keeps working.
  auto big = (*gpu)->Step(RandomBatch({600}, vocab, 3));
  EXPECT_FALSE(big.ok());
  EXPECT_EQ((*gpu)->Embed(a)->data, ea->data);
}

// Lazy CUDA graphs: eager on first use of a bucket, captured on the second, replayed after; a
// different batch in the same bucket replays the same graph and still gets its own results.
TEST_F(CudaEngineTest, GraphsCaptureLazilyAndReplayCorrectly) {
  for (const std::string& dir : {ModelDirs().front(), FoldedModelDirs().front()}) {
    SCOPED_TRACE(dir);
    auto cpu = CpuEngine::Load(dir, {.precision = "reference"});
    ASSERT_TRUE(cpu.ok());
    CudaEngineOptions opt;
    opt.max_tokens = 2048;
    opt.max_seqs = 16;
    auto gpu = CreateCudaEngine(dir, opt);
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    const int vocab = (*gpu)->config().vocab_size;
    Batch a = RandomBatch({20, 3, 30}, vocab, 5);  // 53 tokens: bucket (4 seqs, 64 tokens)
    std::vector<float> first;
    for (int i = 0; i < 3; ++i) {
      auto e = (*gpu)->Embed(a);
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      if (i == 0) first = e->data;
      EXPECT_EQ(e->data, first) << "run " << i;
    }
    auto st = (*gpu)->Stats();
    EXPECT_EQ(st["graph_eager_runs"], 1);
    EXPECT_EQ(st["graph_captures"], 1);
    EXPECT_EQ(st["graph_replays"], 2);
    Batch b = RandomBatch({50, 1, 6}, vocab, 6);  // 57 tokens: same bucket, other contents
    auto got = (*gpu)->Embed(b);
    auto ref = (*cpu)->Embed(b);
    ASSERT_TRUE(got.ok() && ref.ok());
    for (int r = 0; r < got->rows; ++r)
      EXPECT_GE(wire::CosineSimilarity(got->row(r), ref->row(r), got->dim), 0.999) << r;
    EXPECT_EQ((*gpu)->Stats()["graph_replays"], 3);
  }
}

// --quantize fp8 (Qwen3 fixtures): with fp8_min_tokens 0 (raised to kFp8MinM = 2048) every batch
// of >= 2048 tokens takes the fp8 path. Its
// error against the CPU fp32 engine is e4m3 quantisation noise (3 mantissa bits: ~4% relative
// per GEMM input): on these random-weight fixtures the H200 measured a worst cosine of 0.9964
// against bf16, so the bound here is 0.99 (the 0.1% rule is the start-up gate's job, and these
// fixtures do not pass it). The path must replay correctly from graphs and differ from bf16 (so it
// really ran); below the threshold the results are the bf16 engine's (cosine >= 0.9999).
TEST_F(CudaEngineTest, Fp8KeepsFidelityAndFallsBackBelowThreshold) {
  for (const auto& dir : ModelDirs()) {
    SCOPED_TRACE(dir);
    auto cpu = CpuEngine::Load(dir, {.precision = "reference"});
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    if ((*cpu)->config().architecture != Architecture::kQwen3) continue;
    CudaEngineOptions opt;
    opt.max_tokens = 4096;
    opt.max_seqs = 64;
    auto bf16 = CreateCudaEngine(dir, opt);
    opt.quantize = "fp8";
    opt.fp8_min_tokens = 0;
    {  // The gate: either it passes and reports its cosine, or it refuses with a clear message.
      auto gated = CreateCudaEngine(dir, opt);
      if (gated.ok()) {
        EXPECT_GE((*gated)->Stats()["fp8_gate_min_cosine"], 0.999);
      } else {
        EXPECT_NE(gated.status().ToString().find("fidelity gate failed"), std::string::npos)
            << gated.status().ToString();
      }
    }
    opt.fp8_gate = false;
    auto fp8 = CreateCudaEngine(dir, opt);
    opt.fp8_min_tokens = 4096;  // this batch (< 4096 tokens) stays bf16
    auto fp8_off = CreateCudaEngine(dir, opt);
    ASSERT_TRUE(bf16.ok() && fp8.ok() && fp8_off.ok())
        << fp8.status().ToString() << fp8_off.status().ToString();
    const int max_len = (*cpu)->config().max_seq_length;
    // >= 2048 tokens (kFp8MinM: the smallest batch that runs in fp8).
    std::vector<int> lens = {1, 7, 0, 64, 129, 300, 2, 511, 511, 511, 511, 511};
    for (auto& l : lens) l = std::min(l, max_len);
    Batch batch = RandomBatch(lens, (*cpu)->config().vocab_size, 77);
    ASSERT_GE(batch.num_tokens(), 2048);
    auto ref = (*cpu)->Embed(batch);
    auto b = (*bf16)->Embed(batch);
    auto off = (*fp8_off)->Embed(batch);
    ASSERT_TRUE(ref.ok() && b.ok() && off.ok());
    double worst = 1, worst_vs_bf16 = 1, max_diff = 0;
    for (int run = 0; run < 3; ++run) {  // eager, capture, replay
      auto got = (*fp8)->Embed(batch);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      for (int r = 0; r < got->rows; ++r) {
        if (batch.seq_len(r) == 0) continue;
        const double c = wire::CosineSimilarity(got->row(r), ref->row(r), got->dim);
        worst = std::min(worst, c);
        EXPECT_GE(c, 0.99) << "run " << run << " row " << r;
        worst_vs_bf16 =
            std::min(worst_vs_bf16, wire::CosineSimilarity(got->row(r), b->row(r), got->dim));
        for (int i = 0; i < got->dim; ++i)
          max_diff = std::max(max_diff, double(std::fabs(got->row(r)[i] - b->row(r)[i])));
        // Below the threshold: bf16, up to kernel choices (with PETAL_FUSED_GEMMS=1 the bf16
        // engine's fused epilogues round differently: 0.999986 measured in session 18), far
        // from fp8's ~0.996.
        EXPECT_GE(wire::CosineSimilarity(off->row(r), b->row(r), got->dim), 0.9999) << r;
      }
    }
    EXPECT_GT(max_diff, 0.0) << "fp8 gave bit-identical results to bf16: did it run?";
    std::printf("[fp8 vs cpu] %s: worst cosine %.6f (vs bf16 engine %.6f)\n", dir.c_str(), worst,
                worst_vs_bf16);
  }
}

TEST_F(CudaEngineTest, Fp8RejectsBadOptions) {
  const std::string dir = ModelDirs().front();
  CudaEngineOptions opt;
  opt.quantize = "int4";
  EXPECT_FALSE(CreateCudaEngine(dir, opt).ok());
  opt.quantize = "fp8";
  opt.max_tokens = 256;
  opt.fp8_min_tokens = 1024;  // capacity too small for the gate batch: the fp8 path never runs
  auto e = CreateCudaEngine(dir, opt);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().ToString().find("fp8-min-tokens"), std::string::npos)
      << e.status().ToString();
}

}  // namespace
}  // namespace petal

namespace petal {
namespace {

// Issue 29 (an allocation-free hot path): once a bucket's graph is captured and the row buffers
// go back as the server's engine loop gives them, Step + Wait make no host allocation through
// operator new (the CUDA runtime's own allocations, if any, are not counted).
TEST_F(CudaEngineTest, WarmStepsAllocateNothingOnTheHost) {
  const auto dirs = ModelDirs();
  ASSERT_FALSE(dirs.empty());
  CudaEngineOptions opt;
  opt.max_tokens = 2048;
  opt.max_seqs = 16;
  auto gpu = CreateCudaEngine(dirs[0], opt);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  const Batch a = RandomBatch({20, 3, 30}, (*gpu)->config().vocab_size, 5);
  auto step = [&]() -> int {  // rows of one Step + Wait, the rows' buffer given back
    auto h = (*gpu)->Step(a);
    if (!h.ok()) return -1;
    auto e = (*h)->Wait();
    if (!e.ok()) return -1;
    const int rows = e->rows;
    RecycleRowBuffer(std::move(e->data));
    return rows;
  };
  for (int i = 0; i < 4; ++i) ASSERT_EQ(step(), 3);  // eager, capture, replays
  g_news = 0;
  g_count_news = true;
  int rows = 0;
  for (int i = 0; i < 8; ++i) rows += step();
  g_count_news = false;
  EXPECT_EQ(rows, 24);
  EXPECT_EQ(g_news.load(), 0) << "operator new calls in 8 warm steps";
}

}  // namespace
}  // namespace petal
