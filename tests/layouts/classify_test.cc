// Sequence-classifier fixtures (tests/fixtures/classify/) on the CPU engine against the float64
// numpy reference (scripts/ref/classify_numpy.py): a BERT classifier (3 labels, softmax) and an
// XLM-R one (4 labels, multi-label sigmoid), tiny seeded random weights. Per input: the ids and
// token types Petal's tokenizer builds (texts, and pairs through the pair template) equal the
// reference's; the fp32 logits are within 1e-5 (absolute) of the float64 ones on both CPU paths
// (reference and fast), batched (one ragged batch of every input) and one input at a time; the
// probabilities (wire::ClassProbabilities) are within 1e-5 of the reference's.
// Thread-safety: single-threaded test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "classify_fixture.h"
#include "common/file_util.h"
#include "engine/cpu_engine.h"
#include "model/config.h"
#include "tokenizer/rank_input.h"
#include "tokenizer/tokenizer.h"
#include "wire/codec.h"

namespace petal::testing {
namespace {

constexpr double kMaxLogitError = 1e-5;  // issue 31: CPU fp32 vs the reference
constexpr double kMaxProbError = 1e-5;

Batch CasesBatch(const std::vector<ClassifyCase>& cases) {
  Batch b;
  b.cu_seqlens.push_back(0);
  for (const auto& c : cases) {
    b.token_ids.insert(b.token_ids.end(), c.ids.begin(), c.ids.end());
    b.token_type_ids.insert(b.token_type_ids.end(), c.type_ids.begin(), c.type_ids.end());
    b.cu_seqlens.push_back(static_cast<int32_t>(b.token_ids.size()));
  }
  return b;
}

class ClassifyFixtureTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ClassifyFixtureTest, ConfigTokensLogitsAndProbabilitiesMatchTheReference) {
  const std::string name = GetParam();
  auto m = LoadClassifyManifest();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ClassifyFixture fx;
  for (const auto& f : m->fixtures) {
    if (f.spec.name == name) fx = f;
  }
  ASSERT_EQ(fx.spec.name, name);
  auto golden = LoadClassifyGolden(name);
  ASSERT_TRUE(golden.ok()) << golden.status().ToString();
  auto dir = BuildClassifyFolder(*m, fx, *golden);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();

  auto config = LoadModelConfig(*dir);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->task, ModelTask::kClassify);
  EXPECT_EQ(config->labels, golden->labels);
  EXPECT_EQ(config->score_outputs, static_cast<int>(golden->labels.size()));
  EXPECT_STREQ(ClassActivationName(config->class_activation), golden->activation.c_str());
  const bool sigmoid = config->class_activation == ClassActivation::kSigmoid;

  if (FileExists(*dir + "/tokenizer.json")) {
    auto tok = Tokenizer::FromModelDir(*dir);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    EncodeOptions eo;
    eo.max_length = fx.max_length;
    RankInputOptions ro;
    ro.max_length = fx.max_length;
    ro.truncate = true;
    for (const auto& c : golden->cases) {
      if (c.is_pair) {
        auto e = EncodeRankPair(**tok, c.pair.first, c.pair.second, ro);
        ASSERT_TRUE(e.ok()) << e.status().ToString();
        EXPECT_EQ(e->ids, c.ids) << name << ": " << c.pair.first;
        EXPECT_EQ(e->type_ids, c.type_ids) << name << ": " << c.pair.first;
      } else {
        auto ids = (*tok)->Encode(c.text, eo);
        ASSERT_TRUE(ids.ok()) << ids.status().ToString();
        EXPECT_EQ(*ids, c.ids) << name << ": " << c.text;
      }
    }
  }

  for (const char* precision : {"reference", "fp32"}) {  // fp32: auto may pick bf16
    CpuEngineOptions eo;
    eo.precision = precision;
    auto engine = CpuEngine::Load(*dir, eo);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    auto all = (*engine)->Embed(CasesBatch(golden->cases));
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    ASSERT_EQ(all->rows, static_cast<int>(golden->cases.size()));
    ASSERT_EQ(all->dim, static_cast<int>(golden->labels.size()));
    double worst_logit = 0, worst_prob = 0;
    std::vector<double> probs(all->dim);
    for (size_t i = 0; i < golden->cases.size(); ++i) {
      const ClassifyCase& c = golden->cases[i];
      const float* row = all->row(static_cast<int>(i));
      auto one = (*engine)->Embed(CasesBatch({c}));
      ASSERT_TRUE(one.ok()) << one.status().ToString();
      wire::ClassProbabilities(row, all->dim, sigmoid, probs.data());
      for (int k = 0; k < all->dim; ++k) {
        const double err = std::abs(double{row[k]} - c.logits[k]);
        worst_logit = std::max(worst_logit, err);
        worst_prob = std::max(worst_prob, std::abs(probs[k] - c.probs[k]));
        EXPECT_LE(err, kMaxLogitError) << name << " input " << i << " logit " << k;
        EXPECT_LE(std::abs(probs[k] - c.probs[k]), kMaxProbError) << name << " input " << i;
        EXPECT_LE(std::abs(one->row(0)[k] - row[k]), kMaxLogitError) << name << " input " << i;
      }
    }
    std::printf("%s (%s): %zu inputs, worst |logit - ref| = %.3g, worst |prob - ref| = %.3g\n",
                name.c_str(), precision, golden->cases.size(), worst_logit, worst_prob);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ClassifyFixtureTest, ::testing::Values("bert-cls", "xlmr-cls"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// SPLADE (bert-splade: BertForMaskedLM + SpladePooling; xlmr-splade: XLMRobertaForMaskedLM's
// lm_head, vocabulary 250002): one vocabulary-sized row per text on
// both CPU paths, batched and alone; the 64 largest entries at the reference's indices within
// 1e-5, the non-zero count equal (up to entries the reference has below 1e-5), the sum within
// 1e-5 relative.
class SparseFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(SparseFixture, SpladeVectorsMatchTheReference) {
  const std::string name = GetParam();
  auto m = LoadClassifyManifest();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ClassifyFixture fx;
  for (const auto& f : m->fixtures) {
    if (f.spec.name == name) fx = f;
  }
  ASSERT_EQ(fx.spec.name, name);
  auto golden = LoadClassifyGolden(name);
  ASSERT_TRUE(golden.ok()) << golden.status().ToString();
  auto dir = BuildClassifyFolder(*m, fx, *golden);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  auto config = LoadModelConfig(*dir);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->task, ModelTask::kSparse);
  EXPECT_EQ(config->score_head, ScoreHead::kBertMlmSplade);
  EXPECT_EQ(config->OutputDim(), config->vocab_size);
  for (const char* precision : {"reference", "fp32"}) {  // fp32: auto may pick bf16
    CpuEngineOptions eo;
    eo.precision = precision;
    auto engine = CpuEngine::Load(*dir, eo);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    auto all = (*engine)->Embed(CasesBatch(golden->cases));
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    ASSERT_EQ(all->rows, static_cast<int>(golden->cases.size()));
    ASSERT_EQ(all->dim, config->vocab_size);
    double worst = 0;
    for (size_t i = 0; i < golden->cases.size(); ++i) {
      const ClassifyCase& c = golden->cases[i];
      ASSERT_TRUE(all->sparse()) << "the engine answers SPLADE rows as their entries";
      const std::vector<float> dense = all->DenseRow(static_cast<int>(i));
      const float* row = dense.data();
      EXPECT_EQ(all->sparse_offsets[i + 1] - all->sparse_offsets[i],
                std::count_if(dense.begin(), dense.end(), [](float x) { return x > 0; }));
      EXPECT_TRUE(std::is_sorted(all->sparse_indices.begin() + all->sparse_offsets[i],
                                 all->sparse_indices.begin() + all->sparse_offsets[i + 1]));
      auto one = (*engine)->Embed(CasesBatch({c}));
      ASSERT_TRUE(one.ok()) << one.status().ToString();
      const std::vector<float> alone = one->DenseRow(0);
      int64_t nnz = 0;
      double sum = 0, worst_alone = 0;
      for (int v = 0; v < all->dim; ++v) {
        EXPECT_GE(row[v], 0.0f);
        nnz += row[v] > 0;
        sum += row[v];
        worst_alone = std::max(worst_alone, double{std::abs(alone[v] - row[v])});
      }
      EXPECT_LE(worst_alone, kMaxLogitError) << "text " << i << " alone vs batched";
      EXPECT_LE(std::abs(nnz - c.nnz), c.near_zero) << "text " << i;
      EXPECT_NEAR(sum, c.sum, 1e-5 * std::abs(c.sum)) << "text " << i;
      ASSERT_EQ(c.top_index.size(), c.logits.size());
      for (size_t k = 0; k < c.top_index.size(); ++k) {
        const double err = std::abs(double{row[c.top_index[k]]} - c.logits[k]);
        worst = std::max(worst, err);
        EXPECT_LE(err, kMaxLogitError) << "text " << i << " entry " << c.top_index[k];
      }
    }
    std::printf("%s (%s): %zu texts, worst |top-64 value - ref| = %.3g\n", name.c_str(), precision,
                golden->cases.size(), worst);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SparseFixture, ::testing::Values("bert-splade", "xlmr-splade"),
                         [](const auto& info) {
                           std::string n = info.param;
                           n.erase(n.find('-'), 1);
                           return n;
                         });

TEST(ClassProbabilities, SoftmaxSumsToOneAndSigmoidIsPerClass) {
  const float logits[] = {2.5f, -1.25f, 0.75f, 40.0f};
  double p[4];
  wire::ClassProbabilities(logits, 4, false, p);
  double sum = 0;
  for (double v : p) sum += v;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_GT(p[3], p[0]);
  wire::ClassProbabilities(logits, 4, true, p);
  EXPECT_NEAR(p[0], 1.0 / (1.0 + std::exp(-2.5)), 1e-12);
  EXPECT_NEAR(p[1], 1.0 / (1.0 + std::exp(1.25)), 1e-12);
  EXPECT_NEAR(p[3], 1.0, 1e-12);
}

}  // namespace
}  // namespace petal::testing
