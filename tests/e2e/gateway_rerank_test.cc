// End-to-end test of the ranking routes (/rerank, /v1/rerank, /v1/score on a ranking model): two
// in-process inference servers with the CPU engine on the tiny cross-encoder and Qwen3-Reranker
// fixtures (tests/fixtures/rerank/), a gateway with small chunks so that the pairs of one request
// spread over both replicas, and real HTTP requests. Scores must be the reference's
// (sentence-transformers CrossEncoder / HF transformers goldens, within 1e-5), sorted as
// documented; the error cases give the documented codes and messages. Skips what needs a
// tokenizer that is not fetched.
#include <gtest/gtest.h>

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "../layouts/rerank_fixture.h"
#include "common/file_util.h"
#include "cpu_stack.h"
#include "gateway_test_util.h"

namespace petal::gateway {
namespace {

using testing::HttpClient;

struct Stack : testing::CpuStack {
  petal::testing::RerankGolden golden;
  petal::testing::RerankManifest manifest;
};

// Builds the fixture, starts two CPU servers and a gateway in front of them (max_inputs 8).
std::unique_ptr<Stack> Start(const std::string& name) {
  auto st = std::make_unique<Stack>();
  auto m = petal::testing::LoadRerankManifest();
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return nullptr;
  st->manifest = *m;
  petal::testing::RerankFixture fx;
  for (const auto& f : m->fixtures) {
    if (f.spec.name == name) fx = f;
  }
  auto g = petal::testing::LoadRerankGolden(name);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return nullptr;
  st->golden = *g;
  auto dir = petal::testing::BuildRerankFolder(*m, fx, *g);
  EXPECT_TRUE(dir.ok()) << dir.status().ToString();
  if (!dir.ok() || !FileExists(*dir + "/tokenizer.json")) return nullptr;
  // The fixture's max_length is the reference's truncation length: serve with it.
  const std::string pc = *dir + "/petal_config.json";
  FILE* f = std::fopen(pc.c_str(), "w");
  if (f == nullptr) return nullptr;
  std::fprintf(f, "{\"max_seq_length\": %d}\n", fx.max_length);
  std::fclose(f);
  if (!testing::StartCpuStack(*dir, name, /*max_inputs=*/8, st.get())) return nullptr;
  return st;
}

std::string Docs(const std::vector<std::string>& docs, bool objects = false) {
  std::string s = "[";
  for (size_t i = 0; i < docs.size(); ++i) {
    std::string esc;
    for (char ch : docs[i]) {
      if (ch == '"' || ch == '\\') esc += '\\';
      esc += ch;
    }
    s += (i ? "," : "") + (objects ? "{\"text\":\"" + esc + "\"}" : "\"" + esc + "\"");
  }
  return s + "]";
}

class GatewayRerank : public ::testing::TestWithParam<const char*> {};

TEST_P(GatewayRerank, RoutesScoreLikeTheReference) {
  auto st = Start(GetParam());
  if (!st) GTEST_SKIP() << "fixture or tokenizer unavailable";
  HttpClient c(st->gateway->port());
  const auto& docs = st->manifest.documents;
  const auto& cases = st->golden.cases;
  ASSERT_EQ(docs.size(), cases.size());
  const std::string q = "\"" + st->manifest.query + "\"";
  simdjson::dom::parser parser;

  // TEI /rerank: every document, sorted by score descending, scores as the reference's.
  auto r = c.Post("/rerank", "{\"query\":" + q + ",\"texts\":" + Docs(docs) +
                                 ",\"return_text\":true,\"truncate\":true}");
  ASSERT_EQ(r.status, 200u) << r.body;
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(r.body).get(doc)) << r.body;
  double prev = 2;
  size_t n = 0;
  for (auto item : doc.get_array()) {
    const int64_t i = item["index"].get_int64().value();
    const double score = item["score"].get_double().value();
    EXPECT_NEAR(score, cases[i].score, 1e-5) << "document " << i;
    EXPECT_LE(score, prev);
    prev = score;
    EXPECT_EQ(std::string_view(item["text"].get_string().value()), docs[i]);
    ++n;
  }
  EXPECT_EQ(n, docs.size());

  // raw_scores: the logit (yes - no for an LM reranker).
  r = c.Post("/rerank", "{\"query\":" + q + ",\"texts\":" + Docs(docs) +
                            ",\"raw_scores\":true,\"truncate\":true}");
  ASSERT_EQ(r.status, 200u) << r.body;
  ASSERT_FALSE(parser.parse(r.body).get(doc));
  for (auto item : doc.get_array()) {
    const auto& l = cases[item["index"].get_int64().value()].logits;
    const double raw = l.size() == 2 ? double{l[0]} - l[1] : double{l[0]};
    EXPECT_NEAR(item["score"].get_double().value(), raw, 1e-5);
    EXPECT_TRUE(item["text"].error() == simdjson::NO_SUCH_FIELD);
  }

  // Cohere / Jina /v1/rerank: top_n, documents as objects, return_documents, usage.
  r = c.Post("/v1/rerank", "{\"model\":\"m\",\"query\":" + q + ",\"documents\":" +
                               Docs(docs, true) + ",\"top_n\":2,\"return_documents\":true}");
  ASSERT_EQ(r.status, 200u) << r.body;
  ASSERT_FALSE(parser.parse(r.body).get(doc));
  EXPECT_EQ(std::string_view(doc["model"].get_string().value()), "m");
  std::vector<double> all;
  for (const auto& cs : cases) all.push_back(cs.score);
  std::sort(all.rbegin(), all.rend());
  n = 0;
  for (auto item : doc["results"].get_array()) {
    const int64_t i = item["index"].get_int64().value();
    EXPECT_NEAR(item["relevance_score"].get_double().value(), all[n], 1e-5);
    EXPECT_EQ(std::string_view(item["document"]["text"].get_string().value()), docs[i]);
    ++n;
  }
  EXPECT_EQ(n, 2u);
  int64_t tokens = 0;
  for (const auto& cs : cases) tokens += static_cast<int64_t>(cs.ids.size());
  EXPECT_EQ(doc["usage"]["total_tokens"].get_int64().value(), tokens);

  // /v1/score on a ranking model: pair scores, in document order.
  r = c.Post("/v1/score",
             "{\"query\":" + q + ",\"documents\":" + Docs(docs) + ",\"truncate\":true}");
  ASSERT_EQ(r.status, 200u) << r.body;
  ASSERT_FALSE(parser.parse(r.body).get(doc));
  n = 0;
  for (auto item : doc["data"].get_array()) {
    EXPECT_EQ(item["index"].get_int64().value(), static_cast<int64_t>(n));
    EXPECT_NEAR(item["score"].get_double().value(), cases[n].score, 1e-5);
    ++n;
  }
  EXPECT_EQ(n, docs.size());

  // Errors.
  r = c.Post("/rerank", "{\"query\":" + q + ",\"texts\":[]}");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("'texts' must not be empty"), std::string::npos) << r.body;
  r = c.Post("/v1/rerank",
             "{\"query\":" + q + ",\"documents\":" + Docs(std::vector<std::string>(9, "x")) + "}");
  EXPECT_EQ(r.status, 413u);
  EXPECT_NE(r.body.find("at most 8 are allowed"), std::string::npos) << r.body;
  // The long document's pair exceeds the fixture's max_length: without truncate, 413 naming it.
  r = c.Post("/rerank", "{\"query\":" + q + ",\"texts\":" + Docs(docs) + "}");
  EXPECT_EQ(r.status, 413u) << r.body;
  EXPECT_NE(r.body.find("'texts[4]'"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"param\":\"texts\""), std::string::npos) << r.body;
  r = c.Post("/v1/embeddings", "{\"input\":\"hello\"}");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("is a ranking model"), std::string::npos) << r.body;
  r = c.Post("/embed", "{\"inputs\":\"hello\"}");
  EXPECT_EQ(r.status, 400u);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GatewayRerank,
                         ::testing::Values("bert-ce", "xlmr-ce", "qwen3-reranker"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// A rerank route on an embedding model: 400 saying what the model serves (the gateway decides
// from its own config before any server is asked).
TEST(GatewayRerankOnEmbedder, IsRefusedSayingWhatTheModelServes) {
  auto g = testing::StartEmbedderWithoutServers("rerank_on_bge");
  if (!g) GTEST_SKIP() << "no bge fixture with a tokenizer here";
  HttpClient c(g->port());
  for (const char* route : {"/rerank", "/v1/rerank"}) {
    auto r = c.Post(route, "{\"query\":\"q\",\"texts\":[\"a\"],\"documents\":[\"a\"]}");
    EXPECT_EQ(r.status, 400u) << route;
    EXPECT_NE(r.body.find("model 'bge' is an embedding model: it serves /v1/embeddings"),
              std::string::npos)
        << r.body;
  }
}

}  // namespace
}  // namespace petal::gateway
