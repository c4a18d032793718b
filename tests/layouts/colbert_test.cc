// Multi-vector (ColBERT / PyLate) fixtures (tests/fixtures/colbert/) against the float64 numpy
// reference (scripts/ref/colbert_numpy.py): the config's token ids, the gateway's input shaping
// (prefix, truncation, mask expansion) against the reference's ids, per-token vectors on both
// CPU paths (cosine >= 0.99999 per token; documents without their skiplist tokens), MaxSim within
// 1e-5, a ragged mixed batch equal to each sequence alone, and the config refusals (file, key,
// value). Thread-safety: single-threaded test.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "colbert_fixture.h"
#include "common/file_util.h"
#include "engine/cpu_engine.h"
#include "gateway/multivector.h"
#include "tokenizer/tokenizer.h"

namespace petal::testing {
namespace {

namespace fs = std::filesystem;
using Seq = ColbertSeq;
constexpr const char* kDir = kColbertDir;

double Cos(const float* a, const std::vector<double>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < b.size(); ++i)
    ab += a[i] * b[i], aa += double{a[i]} * a[i], bb += b[i] * b[i];
  return ab / std::sqrt(aa * bb);
}

class ColbertTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ColbertTest, MatchesNumpyReference) {
  const ColbertGolden g = LoadColbertGolden(GetParam());
  const std::string dir = BuildColbertFolder(GetParam(), g);
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status().message();
  ASSERT_EQ(config->task, ModelTask::kMultiVector);
  EXPECT_EQ(config->multivector.skiplist_ids, g.skiplist);

  // The gateway's shaping of the texts gives the reference's ids.
  auto tok = Tokenizer::FromModelDir(dir);
  ASSERT_TRUE(tok.ok()) << tok.status().message();
  auto shape = [&](const Seq& s, bool is_query) {
    const gateway::TokenInputRule rule = gateway::TokenInputFor(*config, is_query);
    EncodeOptions eo;
    eo.max_length = rule.max_text_tokens;
    auto ids = (*tok)->Encode(s.text, eo);
    EXPECT_TRUE(ids.ok());
    gateway::ShapeTokenInput(rule, &ids.value());
    EXPECT_EQ(*ids, s.ids) << s.text;
    for (size_t t = 0; t < s.ids.size(); ++t) {
      EXPECT_EQ(gateway::KeepToken(config->multivector, is_query, s.ids[t]), bool(s.keep[t]))
          << s.text << " token " << t;
    }
  };
  for (const Seq& q : g.queries) shape(q, true);
  for (const Seq& d : g.documents) shape(d, false);

  for (const char* precision : {"reference", "fp32"}) {
    SCOPED_TRACE(precision);
    CpuEngineOptions opt;
    opt.precision = precision;
    auto engine = CpuEngine::Load(dir, opt);
    ASSERT_TRUE(engine.ok()) << engine.status().message();
    // Queries and documents in one ragged batch.
    std::vector<const Seq*> all;
    for (const Seq& q : g.queries) all.push_back(&q);
    for (const Seq& d : g.documents) all.push_back(&d);
    Batch batch;
    for (const Seq* s : all) batch.Add(s->ids);
    auto out = (*engine)->Embed(batch);
    ASSERT_TRUE(out.ok()) << out.status().message();
    ASSERT_EQ(out->rows, batch.num_tokens());
    ASSERT_EQ(out->dim, config->score_outputs);
    double worst = 1;
    std::vector<std::vector<float>> kept(all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      size_t k = 0;
      for (size_t t = 0; t < all[i]->ids.size(); ++t) {
        const float* row = out->row(batch.cu_seqlens[i] + static_cast<int>(t));
        if (!all[i]->keep[t]) continue;
        ASSERT_LT(k, all[i]->vecs.size());
        worst = std::min(worst, Cos(row, all[i]->vecs[k++]));
        kept[i].insert(kept[i].end(), row, row + out->dim);
      }
      EXPECT_EQ(k, all[i]->vecs.size());
    }
    EXPECT_GE(worst, 0.99999);
    std::printf("%s %s: worst token cosine 1 - %.3g\n", GetParam().c_str(), precision, 1 - worst);
    const size_t nq = g.queries.size(), dim = static_cast<size_t>(out->dim);
    double err = 0;
    for (size_t q = 0; q < nq; ++q) {
      for (size_t d = 0; d < g.documents.size(); ++d) {
        const auto& a = kept[q];
        const auto& b = kept[nq + d];
        const double s = gateway::MaxSim(a.data(), a.size() / dim, b.data(), b.size() / dim, dim);
        EXPECT_NEAR(s, g.maxsim[q][d], 1e-5) << "query " << q << " document " << d;
        err = std::max(err, std::abs(s - g.maxsim[q][d]));
      }
    }
    std::printf("%s %s: worst MaxSim error %.3g\n", GetParam().c_str(), precision, err);
    // A query alone equals it in the mixed batch (expansion key lengths are per sequence).
    auto alone = (*engine)->Embed(Batch::FromSequences({all[1]->ids}));
    ASSERT_TRUE(alone.ok());
    for (int t = 0; t < alone->rows; ++t) {
      const float* a = alone->row(t);
      const float* b = out->row(batch.cu_seqlens[1] + t);
      for (int j = 0; j < alone->dim; ++j) EXPECT_NEAR(a[j], b[j], 1e-5);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ColbertTest,
                         ::testing::Values("bert-colbert", "bert-colbert-attend"));

// Config refusals: each names the file, the key and the value.
void Rewrite(const std::string& path, const std::string& from, const std::string& to) {
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok()) << path;
  const size_t at = text->find(from);
  ASSERT_NE(at, std::string::npos) << from;
  std::string s = *text;
  s.replace(at, from.size(), to);
  std::ofstream(path) << s;
}

std::string Refusal(const std::string& file, const std::string& from, const std::string& to) {
  const std::string src = SourceDir() + "/" + kDir + "/bert-colbert";
  const std::string dir = LayoutTempDir("colbert-refusal");
  fs::remove_all(dir);
  fs::copy(src, dir, fs::copy_options::recursive);
  fs::copy_file(SourceDir() + "/models/all-MiniLM-L6-v2/tokenizer.json", dir + "/tokenizer.json");
  Rewrite(JoinPath(dir, file), from, to);
  auto c = LoadModelConfig(dir);
  return c.ok() ? std::string("loaded") : c.status().message();
}

TEST(ColbertConfigTest, RefusesWhatItDoesNotImplement) {
  std::string m = Refusal("1_Dense/config.json", "torch.nn.modules.linear.Identity",
                          "torch.nn.modules.activation.Tanh");
  EXPECT_NE(m.find("1_Dense/config.json: key 'activation_function'"), std::string::npos) << m;
  EXPECT_NE(m.find("Tanh"), std::string::npos) << m;
  m = Refusal("1_Dense/config.json", "\"bias\": false", "\"bias\": false, \"use_residual\": true");
  EXPECT_NE(m.find("key 'use_residual'"), std::string::npos) << m;
  m = Refusal("1_Dense/config.json", "\"bias\": false", "\"bias\": false, \"scale\": 2");
  EXPECT_NE(m.find("key 'scale'"), std::string::npos) << m;
  m = Refusal("1_Dense/config.json", "\"in_features\": 64", "\"in_features\": 32");
  EXPECT_NE(m.find("in_features 32"), std::string::npos) << m;
  m = Refusal("config_sentence_transformers.json", "\"MaxSim\"", "\"cosine\"");
  EXPECT_NE(m.find("config_sentence_transformers.json: key 'similarity_fn_name'"),
            std::string::npos)
      << m;
  m = Refusal("config_sentence_transformers.json", "\"[unused0]\"", "\"[Q] \"");
  EXPECT_NE(m.find("key 'query_prefix' = \"[Q] \""), std::string::npos) << m;
  m = Refusal("config_sentence_transformers.json", "\"query_length\": 16", "\"query_length\": 600");
  EXPECT_NE(m.find("key 'query_length' = 600"), std::string::npos) << m;
  m = Refusal("config.json", "\"BertModel\"", "\"BertForSequenceClassification\"");
  EXPECT_NE(m.find("BERT / XLM-R encoders only"), std::string::npos) << m;
  m = Refusal("modules.json", "pylate.models.Dense.Dense\"",
              "pylate.models.Dense.Dense\"}, {\"path\": \"1_Pooling\", \"type\": "
              "\"sentence_transformers.models.Pooling\"");
  EXPECT_NE(m.find("after pooling is not served"), std::string::npos) << m;
}

}  // namespace
}  // namespace petal::testing
