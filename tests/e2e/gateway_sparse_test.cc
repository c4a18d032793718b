// End-to-end test of the sparse (SPLADE) routes on the bert-splade fixture
// (tests/fixtures/classify/): TEI's /embed_sparse and /v1/embeddings with "sparse": true, through
// two in-process CPU inference servers (fp32) and a gateway (classify_stack.h), against the float64
// numpy reference (scripts/ref/classify_numpy.py). Thread-safety: single-threaded test (the
// servers and gateway run their own threads).
#include <gtest/gtest.h>

#include <simdjson.h>

#include <cmath>
#include <map>
#include <vector>

#include "classify_stack.h"
#include "gateway_test_util.h"

namespace petal::gateway {
namespace {

using testing::HttpClient;
using testing::Json;
using testing::StartClassifyStack;
constexpr double kTol = 1e-5;  // CPU fp32 against the float64 reference

// The golden's texts as a JSON array of strings.
template <typename Golden>
std::string GoldenTextsJson(const Golden& g) {
  std::string texts = "[";
  for (size_t i = 0; i < g.cases.size(); ++i) texts += (i ? "," : "") + Json(g.cases[i].text);
  return texts + "]";
}

// TEI's /embed_sparse on the SPLADE fixture (bert-splade): per text, its non-zero entries in index
// order, as many as the reference's, summing to its sum, the 64 largest equal to the reference's
// within 1e-5; /v1/embeddings with "sparse": true gives the same entries (without it: 400); other
// models' routes refused, and /embed_sparse refused on a classifier.
TEST(GatewaySparse, EmbedSparseAnswersLikeTheReference) {
  auto st = StartClassifyStack("bert-splade");
  if (!st) GTEST_SKIP() << "fixture or tokenizer unavailable";
  HttpClient c(st->gateway->port());
  const auto& g = st->golden;
  const std::string texts = GoldenTextsJson(g);
  auto r = c.Post("/embed_sparse", "{\"inputs\":" + texts + ",\"truncate\":true}");
  ASSERT_EQ(r.status, 200u) << r.body.substr(0, 300);
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(r.body).get(doc));
  size_t i = 0;
  std::vector<std::map<int64_t, double>> all;
  for (auto list : doc.get_array()) {
    ASSERT_LT(i, g.cases.size());
    const auto& cs = g.cases[i];
    std::map<int64_t, double> entries;
    int64_t prev = -1;
    double sum = 0;
    for (auto e : list.get_array()) {
      const int64_t index = e["index"].get_int64().value();
      const double value = e["value"].get_double().value();
      EXPECT_GT(index, prev) << "text " << i << ": not in index order";
      EXPECT_GT(value, 0.0) << "text " << i;
      prev = index;
      sum += value;
      entries[index] = value;
    }
    EXPECT_LE(std::abs(static_cast<int64_t>(entries.size()) - cs.nnz), cs.near_zero) << i;
    EXPECT_NEAR(sum, cs.sum, 1e-5 * std::abs(cs.sum)) << "text " << i;
    for (size_t k = 0; k < cs.top_index.size(); ++k) {
      ASSERT_TRUE(entries.count(cs.top_index[k])) << "text " << i << " entry " << cs.top_index[k];
      EXPECT_NEAR(entries[cs.top_index[k]], cs.logits[k], kTol) << "text " << i;
    }
    all.push_back(std::move(entries));
    ++i;
  }
  EXPECT_EQ(i, g.cases.size());
  r = c.Post("/embed_sparse", "{\"inputs\":\"x\",\"dimensions\":8}");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("\"param\":\"dimensions\""), std::string::npos) << r.body;
  r = c.Post("/embed_sparse", "{\"inputs\":[]}");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("\"param\":\"inputs\""), std::string::npos) << r.body;
  r = c.Post("/v1/embeddings", "{\"input\":" + texts + ",\"truncate\":true,\"sparse\":true}");
  ASSERT_EQ(r.status, 200u) << r.body.substr(0, 300);
  ASSERT_FALSE(parser.parse(r.body).get(doc));
  i = 0;
  for (auto item : doc["data"].get_array()) {
    ASSERT_LT(i, all.size());
    EXPECT_EQ(item["index"].get_int64().value(), static_cast<int64_t>(i));
    std::map<int64_t, double> entries;
    auto values = item["embedding"]["values"].get_array().value();
    auto v = values.begin();
    for (auto index : item["embedding"]["indices"].get_array()) {
      ASSERT_TRUE(v != values.end()) << "text " << i;
      entries[index.get_int64().value()] = (*v).get_double().value();
      ++v;
    }
    EXPECT_EQ(entries, all[i]) << "text " << i;
    ++i;
  }
  EXPECT_EQ(i, all.size());
  r = c.Post("/v1/embeddings", "{\"input\":\"x\"}");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("is a sparse embedding model (SPLADE): send \\\"sparse\\\": true"),
            std::string::npos)
      << r.body;
  r = c.Post("/v1/embeddings", "{\"input\":\"x\",\"sparse\":true,\"dimensions\":8}");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("\"param\":\"dimensions\""), std::string::npos) << r.body;
  auto cls = StartClassifyStack("bert-cls");
  ASSERT_TRUE(cls);
  HttpClient cc(cls->gateway->port());
  r = cc.Post("/embed_sparse", "{\"inputs\":\"x\"}");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("/embed_sparse needs a sparse embedding model"), std::string::npos)
      << r.body;
}

// "max_active_dims" (SparseEncoder's max_active_dims) on both routes: each text's answer is the
// reference's k largest entries (its first k of the 64 kept; k where the gap to the next value is
// >= 1e-4), in index order, within 1e-5; anything but a positive integer is a 400 naming it.
TEST(GatewaySparse, MaxActiveDimsKeepsTheLargestValues) {
  auto st = StartClassifyStack("bert-splade");
  if (!st) GTEST_SKIP() << "fixture or tokenizer unavailable";
  HttpClient c(st->gateway->port());
  const auto& g = st->golden;
  const std::string texts = GoldenTextsJson(g);
  simdjson::dom::parser parser;
  for (const int k : {1, 16, 32}) {
    for (const bool openai : {false, true}) {
      const std::string body = openai ? "{\"input\":" + texts + ",\"truncate\":true,\"sparse\":true"
                                      : "{\"inputs\":" + texts + ",\"truncate\":true";
      auto r = c.Post(openai ? "/v1/embeddings" : "/embed_sparse",
                      body + ",\"max_active_dims\":" + std::to_string(k) + "}");
      ASSERT_EQ(r.status, 200u) << r.body.substr(0, 300);
      simdjson::dom::element doc;
      ASSERT_FALSE(parser.parse(r.body).get(doc));
      std::vector<std::vector<std::pair<int64_t, double>>> rows;
      if (openai) {
        for (auto item : doc["data"].get_array()) {
          rows.emplace_back();
          auto values = item["embedding"]["values"].get_array().value();
          auto v = values.begin();
          for (auto index : item["embedding"]["indices"].get_array()) {
            rows.back().emplace_back(index.get_int64().value(), (*v).get_double().value());
            ++v;
          }
        }
      } else {
        for (auto list : doc.get_array()) {
          rows.emplace_back();
          for (auto e : list.get_array()) {
            rows.back().emplace_back(e["index"].get_int64().value(),
                                     e["value"].get_double().value());
          }
        }
      }
      ASSERT_EQ(rows.size(), g.cases.size());
      for (size_t i = 0; i < rows.size(); ++i) {
        const auto& cs = g.cases[i];
        std::map<int64_t, double> want;
        for (int j = 0; j < k && j < static_cast<int>(cs.top_index.size()); ++j)
          want[cs.top_index[j]] = cs.logits[j];
        ASSERT_EQ(rows[i].size(), want.size()) << "text " << i << " k " << k;
        for (size_t j = 0; j < rows[i].size(); ++j) {
          if (j > 0) {
            EXPECT_GT(rows[i][j].first, rows[i][j - 1].first) << "index order";
          }
          ASSERT_TRUE(want.count(rows[i][j].first)) << "text " << i << " k " << k;
          EXPECT_NEAR(rows[i][j].second, want[rows[i][j].first], kTol) << "text " << i;
        }
      }
    }
  }
  for (const char* bad : {"0", "-3", "1.5", "\"8\"", "true"}) {
    auto r =
        c.Post("/embed_sparse", std::string("{\"inputs\":\"x\",\"max_active_dims\":") + bad + "}");
    EXPECT_EQ(r.status, 400u) << bad;
    EXPECT_NE(r.body.find("\"param\":\"max_active_dims\""), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("'max_active_dims' must be a positive integer"), std::string::npos)
        << r.body;
    r = c.Post("/v1/embeddings",
               std::string("{\"input\":\"x\",\"sparse\":true,\"max_active_dims\":") + bad + "}");
    EXPECT_EQ(r.status, 400u) << bad;
    EXPECT_NE(r.body.find("\"param\":\"max_active_dims\""), std::string::npos) << r.body;
  }
}

// Query / document prompts (the fixture's config_sentence_transformers.json: "query": "query: ",
// no default): prompt_name and input_type prepend the prompt as on /embed, on both routes; an
// unknown name is a 400 naming prompt_name.
TEST(GatewaySparse, PromptsApplyAsOnEmbed) {
  auto st = StartClassifyStack("bert-splade");
  if (!st) GTEST_SKIP() << "fixture or tokenizer unavailable";
  HttpClient c(st->gateway->port());
  auto plain = c.Post("/embed_sparse", R"({"inputs":"query: It is a chair."})");
  ASSERT_EQ(plain.status, 200u) << plain.body.substr(0, 300);
  auto named = c.Post("/embed_sparse", R"({"inputs":"It is a chair.","prompt_name":"query"})");
  ASSERT_EQ(named.status, 200u) << named.body.substr(0, 300);
  EXPECT_EQ(named.body, plain.body);
  auto bare = c.Post("/embed_sparse", R"({"inputs":"It is a chair."})");
  ASSERT_EQ(bare.status, 200u);
  EXPECT_NE(bare.body, plain.body);  // no default prompt
  auto typed =
      c.Post("/v1/embeddings", R"({"input":"It is a chair.","sparse":true,"input_type":"query"})");
  auto typed_plain = c.Post("/v1/embeddings", R"({"input":"query: It is a chair.","sparse":true})");
  ASSERT_EQ(typed.status, 200u) << typed.body.substr(0, 300);
  ASSERT_EQ(typed_plain.status, 200u);
  const auto usage = typed.body.find("\"model\"");
  EXPECT_EQ(typed.body.substr(0, usage), typed_plain.body.substr(0, usage));
  auto unknown = c.Post("/embed_sparse", R"({"inputs":"x","prompt_name":"nope"})");
  EXPECT_EQ(unknown.status, 400u);
  EXPECT_NE(unknown.body.find("\"param\":\"prompt_name\""), std::string::npos) << unknown.body;
}

}  // namespace
}  // namespace petal::gateway
