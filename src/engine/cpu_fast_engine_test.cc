// The fast CPU path against the fp32 reference forward on real all-MiniLM-L6-v2 weights (skipped
// if the folder is absent) and on a tiny random Qwen3 made here: fast fp32 to float rounding
// (cosine >= 0.99999), int8 to a stated bound (it misses the 0.999 rule on MiniLM: opt-in),
// run-to-run and load-to-load determinism, and the path names and errors.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "common/file_util.h"
#include "engine/cpu_engine.h"
#include "model/make_model.h"

namespace petal {
namespace {

std::string MiniLmDir() {
  const char* s = std::getenv("PETAL_SOURCE_DIR");
  return JoinPath(s ? s : ".", "models/all-MiniLM-L6-v2");
}

// Ragged random batch: lengths across the attention blocks (1, 31..33, 64..65, 200).
Batch RandomBatch(int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tok(std::min(1000, vocab / 2), vocab - 1);
  Batch b;
  for (int len : {1, 33, 7, 65, 200, 31}) {
    std::vector<int32_t> ids(len);
    for (auto& t : ids) t = tok(rng);
    b.Add(ids);
  }
  return b;
}

double WorstCosine(const Embeddings& a, const Embeddings& b) {
  double worst = 1.0;
  for (int r = 0; r < a.rows; ++r) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < a.dim; ++i) {
      ab += double(a.row(r)[i]) * b.row(r)[i];
      aa += double(a.row(r)[i]) * a.row(r)[i];
      bb += double(b.row(r)[i]) * b.row(r)[i];
    }
    worst = std::min(worst, ab / std::sqrt(aa * bb + 1e-30));
  }
  return worst;
}

void ExpectPathsAgree(const std::string& dir, double int8_min) {
  auto ref = CpuEngine::Load(dir, {.precision = "reference"});
  auto fast = CpuEngine::Load(dir, {.precision = "fp32"});
  auto again = CpuEngine::Load(dir, {.precision = "fp32"});
  auto int8 = CpuEngine::Load(dir, {.precision = "int8"});
  ASSERT_TRUE(ref.ok() && fast.ok() && again.ok() && int8.ok()) << fast.status().ToString();
  EXPECT_EQ((*ref)->path(), "reference");
  EXPECT_EQ((*fast)->path(), "fp32");
  EXPECT_NE((*fast)->Describe().find("oneDNN"), std::string::npos) << (*fast)->Describe();
  const Batch b = RandomBatch((*ref)->config().vocab_size, 3);
  auto r = (*ref)->Embed(b), f = (*fast)->Embed(b), f2 = (*fast)->Embed(b), g = (*again)->Embed(b);
  auto q = (*int8)->Embed(b);
  ASSERT_TRUE(r.ok() && f.ok() && f2.ok() && g.ok() && q.ok());
  EXPECT_GE(WorstCosine(*f, *r), 0.99999);
  for (size_t i = 0; i < r->data.size(); ++i) ASSERT_NEAR(f->data[i], r->data[i], 1e-4) << i;
  EXPECT_EQ(f->data, f2->data);  // bit for bit, run to run
  EXPECT_EQ(f->data, g->data);   // and engine to engine
  const double worst = WorstCosine(*q, *r);
  ::testing::Test::RecordProperty("int8_worst_cosine", std::to_string(worst));
  std::printf("%s: int8 worst cosine vs fp32 reference %.6f\n", dir.c_str(), worst);
  EXPECT_GE(worst, int8_min);
}

TEST(CpuFastEngineTest, MiniLmFastPathsMatchReference) {
  if (!FileExists(JoinPath(MiniLmDir(), "model.safetensors"))) GTEST_SKIP() << "no MiniLM";
  // int8 does not keep the 0.999 rule on MiniLM (0.9906 measured on this batch: the short random
  // sequences are the worst), which is why it is opt-in and auto never picks it.
  ExpectPathsAgree(MiniLmDir(), 0.985);
}

TEST(CpuFastEngineTest, TinyQwen3FastPathsMatchReference) {
  for (const auto& [shape, mask] : {std::pair{"qwen3-tiny", AttentionMask::kBidirectional},
                                    std::pair{"qwen3-tiny-gqa3", AttentionMask::kCausal}}) {
    SCOPED_TRACE(shape);
    const std::string dir = std::filesystem::temp_directory_path() /
                            ("petal_cpu_fast_" + std::string(shape) + std::to_string(getpid()));
    MakeModelOptions opt;
    opt.shape = shape;
    opt.mask = mask;
    opt.dtype = DType::kF32;
    opt.out_dir = dir;
    Status st = MakeModel(opt);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ExpectPathsAgree(dir, 0.99);
    std::filesystem::remove_all(dir);
  }
}

TEST(CpuFastEngineTest, UnknownAndUnavailablePrecisionsFail) {
  if (!FileExists(JoinPath(MiniLmDir(), "model.safetensors"))) GTEST_SKIP() << "no MiniLM";
  EXPECT_FALSE(CpuEngine::Load(MiniLmDir(), {.precision = "fp7"}).ok());
  // bf16 without the hardware: cpu_bf16_engine_test.cc.
}

// A CPU without AVX2 (forced with PETAL_CPU_ISA=generic, read once per process: hence a fresh
// child process) runs the reference forward whatever precision was asked, and still embeds.
TEST(CpuFastEngineTest, GenericCpuFallsBackToReference) {
  if (!FileExists(JoinPath(MiniLmDir(), "model.safetensors"))) GTEST_SKIP() << "no MiniLM";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("PETAL_CPU_ISA", "generic", 1);
        auto e = CpuEngine::Load(MiniLmDir(), {.precision = "int8"});
        const bool ok = e.ok() && (*e)->path() == "reference" &&
                        (*e)->Describe().find("no AVX2") != std::string::npos &&
                        (*e)->Embed(RandomBatch(30522, 5)).ok();
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace petal
