// End-to-end test of the multi-vector routes on the ColBERT fixtures (tests/fixtures/colbert/):
// two in-process CPU inference servers, a gateway with small chunks so that a request spreads
// over both, real HTTP. /embed_all (queries and documents: every kept token's vector) and
// /v1/score's MaxSim mode must give the float64 numpy reference's values (scripts/ref/
// colbert_numpy.py): token cosine >= 0.99999, MaxSim within 1e-5; int8 token vectors keep the
// shapes; bad options get 400 naming the field; other models' routes get 400 naming what the
// model serves. Thread-safety: single-threaded test (the servers and gateway run their own
// threads).
#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "../layouts/colbert_fixture.h"
#include "common/file_util.h"
#include "cpu_stack.h"
#include "gateway_test_util.h"

namespace petal::gateway {
namespace {

using petal::testing::ColbertGolden;
using testing::HttpClient;
using testing::Json;

struct Stack : testing::CpuStack {
  ColbertGolden golden;
};

std::unique_ptr<Stack> Start(const std::string& name) {
  auto st = std::make_unique<Stack>();
  st->golden = petal::testing::LoadColbertGolden(name);
  const std::string dir = petal::testing::BuildColbertFolder(name, st->golden);
  if (!FileExists(dir + "/tokenizer.json")) return nullptr;
  if (!testing::StartCpuStack(dir, name, /*max_inputs=*/9, st.get())) return nullptr;
  return st;
}

std::string Texts(const std::vector<petal::testing::ColbertSeq>& seqs) {
  std::string out = "[";
  for (size_t i = 0; i < seqs.size(); ++i) out += (i ? "," : "") + Json(seqs[i].text);
  return out + "]";
}

// Checks an /embed_all answer against the golden sequences: one list per input, each token's
// vector the reference's within cosine 0.99999.
void CheckEmbedAll(const std::string& body, const std::vector<petal::testing::ColbertSeq>& want) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(body).get(doc)) << body.substr(0, 200);
  simdjson::dom::array inputs = doc.get_array().value();
  ASSERT_EQ(inputs.size(), want.size());
  double worst = 1;
  size_t i = 0;
  for (auto input : inputs) {
    simdjson::dom::array tokens = input.get_array().value();
    ASSERT_EQ(tokens.size(), want[i].vecs.size()) << "input " << i;
    size_t t = 0;
    for (auto tok : tokens) {
      const auto& ref = want[i].vecs[t++];
      double ab = 0, aa = 0, bb = 0;
      size_t k = 0;
      simdjson::dom::array values = tok.get_array().value();
      for (auto x : values) {
        const double v = x.get_double().value();
        ab += v * ref[k], aa += v * v, bb += ref[k] * ref[k];
        ++k;
      }
      ASSERT_EQ(k, ref.size());
      worst = std::min(worst, ab / std::sqrt(aa * bb));
    }
    ++i;
  }
  EXPECT_GE(worst, 0.99999);
}

// /v1/score's MaxSim mode, every golden query against every golden document: each score within
// tolerance(query) of the reference; returns the largest |score - reference|.
template <class Tolerance>
double WorstMaxSimError(HttpClient* c, const ColbertGolden& g, Tolerance tolerance) {
  double worst = 0;
  for (size_t q = 0; q < g.queries.size(); ++q) {
    auto r = c->Post("/v1/score", "{\"query\":" + Json(g.queries[q].text) +
                                      ",\"documents\":" + Texts(g.documents) + "}");
    EXPECT_EQ(r.status, 200u) << r.body;
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    if (parser.parse(r.body).get(doc)) {
      ADD_FAILURE() << "not JSON: " << r.body;
      return 1e30;
    }
    size_t n = 0;
    simdjson::dom::array items = doc["data"].get_array().value();  // named: the loop outlives it
    for (auto item : items) {
      const size_t index = static_cast<size_t>(item["index"].get_int64().value());
      if (index >= g.documents.size()) {
        ADD_FAILURE() << "document index " << index << " out of range";
        return 1e30;
      }
      const double err = std::fabs(item["score"].get_double().value() - g.maxsim[q][index]);
      EXPECT_LE(err, tolerance(q)) << "query " << q << " document " << index;
      worst = std::max(worst, err);
      ++n;
    }
    EXPECT_EQ(n, g.documents.size());
  }
  return worst;
}

class GatewayColbert : public ::testing::TestWithParam<std::string> {};

TEST_P(GatewayColbert, RoutesAnswerLikeTheReference) {
  auto st = Start(GetParam());
  if (!st) GTEST_SKIP() << "fixture or tokenizer unavailable";
  HttpClient c(st->gateway->port());
  const ColbertGolden& g = st->golden;
  // Queries: the default input type (PyLate's encode default).
  auto r = c.Post("/embed_all", "{\"inputs\":" + Texts(g.queries) + "}");
  ASSERT_EQ(r.status, 200u) << r.body.substr(0, 300);
  CheckEmbedAll(r.body, g.queries);
  r = c.Post("/embed_all", "{\"inputs\":" + Texts(g.documents) + ",\"input_type\":\"document\"}");
  ASSERT_EQ(r.status, 200u) << r.body.substr(0, 300);
  CheckEmbedAll(r.body, g.documents);
  // One text, not a list: still a list of inputs (TEI).
  r = c.Post("/embed_all", "{\"inputs\":" + Json(g.queries[0].text) + "}");
  ASSERT_EQ(r.status, 200u) << r.body.substr(0, 300);
  CheckEmbedAll(r.body, {g.queries[0]});
  // int8 token vectors: same shape, ints.
  r = c.Post("/embed_all", "{\"inputs\":" + Json(g.documents[0].text) +
                               ",\"input_type\":\"document\",\"output_dtype\":\"int8\"}");
  ASSERT_EQ(r.status, 200u) << r.body.substr(0, 300);
  {
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    ASSERT_FALSE(parser.parse(r.body).get(doc)) << r.body.substr(0, 200);
    auto tokens = doc.at(0).get_array().value();
    EXPECT_EQ(tokens.size(), g.documents[0].vecs.size());
    int64_t v = 0;
    EXPECT_FALSE(tokens.at(0).at(0).get_int64().get(v)) << r.body.substr(0, 200);
  }
  // MaxSim through /v1/score: every query against every document.
  EXPECT_LE(WorstMaxSimError(&c, g, [](size_t) { return 1e-5; }), 1e-5);
  // top_k: the best documents first.
  r = c.Post("/v1/score", "{\"query\":" + Json(g.queries[0].text) +
                              ",\"documents\":" + Texts(g.documents) + ",\"top_k\":2}");
  ASSERT_EQ(r.status, 200u) << r.body;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(r.body).get(doc));
  auto data = doc["data"].get_array().value();
  ASSERT_EQ(data.size(), 2u);
  size_t best = 0;
  for (size_t d = 1; d < g.documents.size(); ++d) {
    if (g.maxsim[0][d] > g.maxsim[0][best]) best = d;
  }
  EXPECT_EQ(static_cast<size_t>(data.at(0)["index"].get_int64().value()), best);
}

// MaxSim over token vectors that cross from the server as float16 (what a CUDA replica sends;
// PETAL_TOKEN_VECTORS_F16 forces it here): each score within the bound of float16's rounding,
// 2^-10 per query vector's dot product with a unit-norm document vector.
TEST_P(GatewayColbert, MaxSimOverFloat16TokenVectors) {
  setenv("PETAL_TOKEN_VECTORS_F16", "1", 1);
  auto st = Start(GetParam());
  unsetenv("PETAL_TOKEN_VECTORS_F16");
  if (!st) GTEST_SKIP() << "fixture or tokenizer unavailable";
  HttpClient c(st->gateway->port());
  const ColbertGolden& g = st->golden;
  // Float16's rounding bounds each query vector's dot product with a unit-norm vector by 2^-10.
  const double worst = WorstMaxSimError(
      &c, g, [&](size_t q) { return 1e-3 * static_cast<double>(g.queries[q].vecs.size()); });
  std::printf("MaxSim over float16 token vectors: worst |score - reference| %.3g\n", worst);
  // The float32 path is within ~1e-6 of the reference; a float16 one cannot be that close.
  EXPECT_GT(worst, 1e-5) << "the token vectors did not cross as float16";
}

TEST_P(GatewayColbert, BadOptionsAndOtherRoutesAreRefused) {
  auto st = Start(GetParam());
  if (!st) GTEST_SKIP() << "fixture or tokenizer unavailable";
  HttpClient c(st->gateway->port());
  struct Case {
    std::string route, body;
    unsigned status;
    std::string message;
  };
  const Case cases[] = {
      {"/embed_all", R"({"inputs": "a", "dimensions": 8})", 400, "'dimensions' does not apply"},
      {"/embed_all", R"({"inputs": "a", "normalize": false})", 400, "L2-normalised token"},
      {"/embed_all", R"({"inputs": "a", "input_type": "passage"})", 400, "input_type"},
      {"/embed_all", R"({"inputs": ""})", 400, "empty string"},
      {"/embed_all", R"({"nope": 1})", 400, "'inputs' is required"},
      {"/v1/score", R"({"query": "", "documents": ["a"]})", 400, "'query' is an empty string"},
      {"/v1/embeddings", R"({"input": "a"})", 400, "is a multi-vector model"},
      {"/embed", R"({"inputs": "a"})", 400, "/v1/score and /embed_all"},
      {"/rerank", R"({"query": "a", "texts": ["b"]})", 400, "is a multi-vector model"},
  };
  for (const Case& k : cases) {
    auto r = c.Post(k.route, k.body);
    EXPECT_EQ(r.status, k.status) << k.route << " " << k.body << ": " << r.body;
    EXPECT_NE(r.body.find(k.message), std::string::npos)
        << k.route << " " << k.body << ": " << r.body;
  }
  auto info = c.Get("/info");
  EXPECT_NE(info.body.find("\"task\":\"multivector\""), std::string::npos) << info.body;
  EXPECT_NE(info.body.find("\"token_dim\":24"), std::string::npos) << info.body;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GatewayColbert,
                         ::testing::Values("bert-colbert", "bert-colbert-attend"));

}  // namespace
}  // namespace petal::gateway
