// The published config layouts (tests/fixtures/layouts/) on the CUDA engine (bf16) against the
// HF fp32 goldens: cosine >= 0.999 per text (issue 16). Label gpu; skips without a device.
#include <gtest/gtest.h>

#include "engine/cuda/cuda_engine.h"
#include "layout_fixture.h"
#include "model/config.h"

namespace petal::testing {
namespace {

constexpr double kMinCosine = 0.999;

class LayoutGpuTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LayoutGpuTest, MatchesTheGoldenOnTheCudaEngine) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device";
  uint64_t seed = 0;
  auto layouts = LoadLayouts(&seed);
  ASSERT_TRUE(layouts.ok()) << layouts.status().ToString();
  LayoutSpec spec;
  for (const LayoutSpec& s : *layouts) {
    if (s.name == GetParam()) spec = s;
  }
  ASSERT_EQ(spec.name, GetParam());
  const std::string dir = LayoutTempDir("gpu_" + spec.name);
  Status st = BuildLayoutFolder(spec, seed, dir);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto golden = LoadGolden(spec.name);
  ASSERT_TRUE(golden.ok()) << golden.status().ToString();
  CudaEngineOptions opts;
  opts.max_tokens = 2048;
  opts.max_seqs = 16;
  auto engine = CreateCudaEngine(dir, opts);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  std::vector<std::vector<int32_t>> ids;
  for (const GoldenCase& g : golden->cases) ids.push_back(g.ids);
  // Twice: the first batch of a shape runs eagerly, the second is captured into a graph.
  for (int pass = 0; pass < 2; ++pass) {
    auto e = (*engine)->Embed(Batch::FromSequences(ids));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ASSERT_EQ(e->rows, static_cast<int>(ids.size()));
    for (size_t i = 0; i < ids.size(); ++i) {
      const double cos = Cosine(e->row(i), golden->cases[i].embedding.data(), e->dim);
      EXPECT_GE(cos, kMinCosine) << spec.name << " pass " << pass << " case " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Published, LayoutGpuTest,
                         ::testing::Values("pplx-embed-v1", "qwen3-embedding", "bge", "e5", "gte",
                                           "bge-m3", "multilingual-e5"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace petal::testing
