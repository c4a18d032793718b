// End-to-end tests of CpuEngine with the BERT model on real all-MiniLM-L6-v2 weights (skipped if
// models/all-MiniLM-L6-v2 is absent): load from a folder, pooling and normalisation from the
// sentence-transformers config, CLS pooling via petal_config.json, and batch validation errors.
#include "engine/cpu_engine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/file_util.h"

namespace petal {
namespace {

namespace fs = std::filesystem;

std::string MiniLmDir() {
  const char* s = std::getenv("PETAL_SOURCE_DIR");
  return JoinPath(s ? s : ".", "models/all-MiniLM-L6-v2");
}

#define SKIP_WITHOUT_MINILM()                                                   \
  if (!FileExists(JoinPath(MiniLmDir(), "model.safetensors"))) {                \
    GTEST_SKIP() << MiniLmDir() << " is missing (scripts/setup.sh fetches it)"; \
  }

// "Hello world" and "A man is eating food." as the MiniLM tokenizer encodes them.
const std::vector<std::vector<int32_t>> kSeqs = {{101, 7592, 2088, 102},
                                                 {101, 1037, 2158, 2003, 5983, 2833, 1012, 102}};

TEST(CpuEngineTest, MiniLmMeanPooledUnitVectors) {
  SKIP_WITHOUT_MINILM();
  auto engine = CpuEngine::Load(MiniLmDir(), {.precision = "fp32"});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  const ModelConfig& c = (*engine)->config();
  EXPECT_EQ(c.architecture, Architecture::kBert);
  EXPECT_EQ(c.pooling, PoolingMode::kMean);
  EXPECT_TRUE(c.normalize);
  EXPECT_EQ(c.max_seq_length, 256);
  EXPECT_EQ((*engine)->backend(), "cpu");

  auto pending = (*engine)->Step(Batch::FromSequences(kSeqs));
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  EXPECT_TRUE((*pending)->Ready());
  auto e = (*pending)->Wait();
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_EQ(e->rows, 2);
  ASSERT_EQ(e->dim, 384);
  double dot = 0;
  for (int r = 0; r < 2; ++r) {
    double norm = 0;
    for (int i = 0; i < e->dim; ++i) norm += double(e->row(r)[i]) * e->row(r)[i];
    EXPECT_NEAR(norm, 1.0, 1e-5) << "row " << r;
  }
  for (int i = 0; i < e->dim; ++i) dot += double(e->row(0)[i]) * e->row(1)[i];
  EXPECT_LT(dot, 0.5);  // unrelated sentences are not near-duplicates
  // First values of "Hello world", from the float64 numpy reference (scripts/ref/bert_numpy.py).
  EXPECT_NEAR(e->row(0)[0], -0.0344773, 1e-5);
  EXPECT_NEAR(e->row(0)[1], 0.0310232, 1e-5);
}

TEST(CpuEngineTest, ClsPoolingFromPetalConfig) {
  SKIP_WITHOUT_MINILM();
  // A folder that reuses MiniLM's weights but asks for CLS pooling without normalisation.
  std::string tmpl = (fs::temp_directory_path() / "petal_engine_test_XXXXXX").string();
  const std::string dir = mkdtemp(tmpl.data());
  for (const char* f : {"config.json", "model.safetensors"}) {
    fs::create_symlink(fs::absolute(JoinPath(MiniLmDir(), f)), JoinPath(dir, f));
  }
  std::ofstream(JoinPath(dir, "petal_config.json")) << R"({"pooling":"cls","normalize":false})";
  auto engine = CpuEngine::Load(dir, {.precision = "fp32"});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ((*engine)->config().pooling, PoolingMode::kCls);
  Batch batch = Batch::FromSequences(kSeqs);
  auto e = (*engine)->Embed(batch);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  std::vector<float> hidden;
  ASSERT_TRUE((*engine)->model().Forward(batch, &hidden).ok());
  for (int r = 0; r < 2; ++r) {
    const float* cls = hidden.data() + static_cast<size_t>(batch.cu_seqlens[r]) * e->dim;
    for (int i = 0; i < e->dim; ++i) ASSERT_EQ(e->row(r)[i], cls[i]) << "row " << r;
  }
  fs::remove_all(dir);
}

TEST(CpuEngineTest, RejectsBadBatches) {
  SKIP_WITHOUT_MINILM();
  auto engine = CpuEngine::Load(MiniLmDir(), {.precision = "fp32"});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto bad_id = (*engine)->Step(Batch::FromSequences({{101, 30522, 102}}));
  ASSERT_FALSE(bad_id.ok());
  EXPECT_NE(bad_id.status().message().find("30522"), std::string::npos);
  auto too_long = (*engine)->Step(Batch::FromSequences({std::vector<int32_t>(513, 1000)}));
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("513"), std::string::npos);
}

// Pool spans: a whole-sequence span with the model's pooling and normalisation is exactly the
// normal row; a sub-span is the raw mean of those tokens' final states (checked against the
// sequence's own mean row being different, and against the span being pooled from a batch that
// also holds another sequence: spans see only their own sequence's states).
TEST(CpuEngineTest, PoolSpansMatchRowsAndStayInsideTheirSequence) {
  SKIP_WITHOUT_MINILM();
  auto engine = CpuEngine::Load(MiniLmDir(), {.precision = "fp32"});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  Batch plain = Batch::FromSequences(kSeqs);
  auto rows = (*engine)->Embed(plain);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  Batch spans = plain;
  spans.AddSpan(0, 4, 0, true);   // sequence 0 whole, mean, normalised: row 0
  spans.AddSpan(5, 7, 0, false);  // tokens 1..2 of sequence 1, raw mean
  spans.AddSpan(4, 12, 0, true);  // sequence 1 whole: row 1
  auto out = (*engine)->Embed(spans);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->rows, 3);
  for (int d = 0; d < out->dim; ++d) {
    EXPECT_FLOAT_EQ(out->row(0)[d], rows->row(0)[d]);
    EXPECT_FLOAT_EQ(out->row(2)[d], rows->row(1)[d]);
  }
  Batch alone = Batch::FromSequences({kSeqs[1]});
  alone.AddSpan(1, 3, 0, false);
  auto single = (*engine)->Embed(alone);
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  for (int d = 0; d < out->dim; ++d) EXPECT_NEAR(out->row(1)[d], single->row(0)[d], 1e-5);

  Batch crossing = plain;
  crossing.AddSpan(2, 6, 0, false);
  auto bad = (*engine)->Step(crossing);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("sequence boundary"), std::string::npos);
  Batch empty = plain;
  empty.AddSpan(3, 3, 0, false);
  EXPECT_FALSE((*engine)->Step(empty).ok());
}

TEST(CpuEngineTest, MissingFolderFails) {
  auto engine = CpuEngine::Load("/nonexistent/petal-model");
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("/nonexistent/petal-model"), std::string::npos);
}

}  // namespace
}  // namespace petal
