// End-to-end test of the classification routes (/predict, TEI; /classify, vLLM) on the sequence
// classifier fixtures (tests/fixtures/classify/: BERT with 3 softmax labels, XLM-R with 4
// multi-label sigmoid ones): two in-process CPU inference servers, a gateway with small chunks so
// that a batch spreads over both, and real HTTP requests. Probabilities and raw logits must be
// the float64 numpy reference's (scripts/ref/classify_numpy.py) within 1e-5, labels sorted as
// documented; malformed bodies get 400 / 413 naming the field; routes for other kinds of model
// get 400 naming what the model serves, and the classification routes refuse an embedder.
// Thread-safety: single-threaded test (the servers and gateway run their own threads).
#include <gtest/gtest.h>

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <thread>

#include "../layouts/classify_fixture.h"
#include "classify_stack.h"
#include "common/file_util.h"
#include "engine/engine_factory.h"
#include "gateway/gateway.h"
#include "gateway_test_util.h"
#include "server/server.h"

namespace petal::gateway {
namespace {

using testing::HttpClient;
using testing::Json;
using testing::StartClassifyStack;
constexpr double kTol = 1e-5;  // CPU fp32 against the float64 reference

// A case as a /predict input: "text", or ["text", "text_pair"].
std::string PredictInput(const petal::testing::ClassifyCase& c) {
  return c.is_pair ? "[" + Json(c.pair.first) + "," + Json(c.pair.second) + "]" : Json(c.text);
}

// Checks one /predict list against the case: every label once, highest score first, each the
// reference's probability (or logit when raw).
void CheckPredictList(simdjson::dom::array list, const petal::testing::ClassifyGolden& g,
                      const petal::testing::ClassifyCase& c, bool raw, const std::string& what) {
  double prev = INFINITY;
  size_t n = 0;
  std::vector<bool> seen(g.labels.size(), false);
  for (auto item : list) {
    const std::string label(item["label"].get_string().value());
    const double score = item["score"].get_double().value();
    const auto at = std::find(g.labels.begin(), g.labels.end(), label);
    ASSERT_NE(at, g.labels.end()) << what << ": label " << label;
    const size_t k = static_cast<size_t>(at - g.labels.begin());
    EXPECT_FALSE(seen[k]) << what << ": label " << label << " twice";
    seen[k] = true;
    EXPECT_NEAR(score, raw ? c.logits[k] : c.probs[k], kTol) << what << ": " << label;
    EXPECT_LE(score, prev) << what << ": not sorted by score";
    prev = score;
    ++n;
  }
  EXPECT_EQ(n, g.labels.size()) << what;
}

class GatewayClassify : public ::testing::TestWithParam<const char*> {};

TEST_P(GatewayClassify, RoutesAnswerLikeTheReference) {
  auto st = StartClassifyStack(GetParam());
  if (!st) GTEST_SKIP() << "fixture or tokenizer unavailable";
  HttpClient c(st->gateway->port());
  const auto& g = st->golden;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const petal::testing::ClassifyCase* first_pair = nullptr;
  for (const auto& cs : g.cases) {
    if (cs.is_pair && first_pair == nullptr) first_pair = &cs;
  }
  ASSERT_NE(first_pair, nullptr);

  // One text: one flat list.
  auto r = c.Post("/predict", "{\"inputs\":" + Json(g.cases[0].text) + "}");
  ASSERT_EQ(r.status, 200u) << r.body;
  ASSERT_FALSE(parser.parse(r.body).get(doc)) << r.body;
  CheckPredictList(doc.get_array(), g, g.cases[0], false, "single text");

  // An array of two strings is one pair (TEI), answered with one flat list.
  r = c.Post("/predict", "{\"inputs\":" + PredictInput(*first_pair) + ",\"truncate\":true}");
  ASSERT_EQ(r.status, 200u) << r.body;
  ASSERT_FALSE(parser.parse(r.body).get(doc)) << r.body;
  CheckPredictList(doc.get_array(), g, *first_pair, false, "one pair");

  // A batch of every case (texts and pairs), truncated, probabilities then raw logits.
  std::string batch = "[";
  for (size_t i = 0; i < g.cases.size(); ++i) {
    batch += (i ? "," : "") + PredictInput(g.cases[i]);
  }
  batch += "]";
  for (bool raw : {false, true}) {
    r = c.Post("/predict", "{\"inputs\":" + batch + ",\"truncate\":true,\"raw_scores\":" +
                               (raw ? "true" : "false") + "}");
    ASSERT_EQ(r.status, 200u) << r.body;
    ASSERT_FALSE(parser.parse(r.body).get(doc)) << r.body;
    size_t i = 0;
    for (auto list : doc.get_array()) {
      ASSERT_LT(i, g.cases.size());
      CheckPredictList(list.get_array(), g, g.cases[i], raw, "batch input " + std::to_string(i));
      ++i;
    }
    EXPECT_EQ(i, g.cases.size());
  }

  // vLLM /classify: texts only; probs in label order, the most probable label, usage.
  std::string texts = "[";
  int64_t tokens = 0;
  std::vector<const petal::testing::ClassifyCase*> singles;
  for (const auto& cs : g.cases) {
    if (cs.is_pair) continue;
    texts += (singles.empty() ? "" : ",") + Json(cs.text);
    singles.push_back(&cs);
    tokens += static_cast<int64_t>(cs.ids.size());
  }
  texts += "]";
  r = c.Post("/classify", "{\"model\":\"m\",\"input\":" + texts + ",\"truncate\":true}");
  ASSERT_EQ(r.status, 200u) << r.body;
  ASSERT_FALSE(parser.parse(r.body).get(doc)) << r.body;
  EXPECT_EQ(std::string_view(doc["object"].get_string().value()), "list");
  EXPECT_EQ(std::string_view(doc["model"].get_string().value()), "m");
  EXPECT_EQ(std::string_view(doc["id"].get_string().value()).rfind("classify-", 0), 0u);
  EXPECT_GT(doc["created"].get_int64().value(), 1700000000);
  EXPECT_EQ(doc["usage"]["prompt_tokens"].get_int64().value(), tokens);
  EXPECT_EQ(doc["usage"]["total_tokens"].get_int64().value(), tokens);
  size_t i = 0;
  for (auto item : doc["data"].get_array()) {
    ASSERT_LT(i, singles.size());
    const auto& cs = *singles[i];
    EXPECT_EQ(item["index"].get_int64().value(), static_cast<int64_t>(i));
    EXPECT_EQ(item["num_classes"].get_int64().value(), static_cast<int64_t>(g.labels.size()));
    size_t k = 0;
    for (auto p : item["probs"].get_array()) {
      EXPECT_NEAR(p.get_double().value(), cs.probs[k], kTol) << "input " << i << " class " << k;
      ++k;
    }
    EXPECT_EQ(k, g.labels.size());
    const size_t best =
        static_cast<size_t>(std::max_element(cs.probs.begin(), cs.probs.end()) - cs.probs.begin());
    EXPECT_EQ(std::string(item["label"].get_string().value()), g.labels[best]);
    ++i;
  }
  EXPECT_EQ(i, singles.size());
  // "activation": false: the logits.
  r = c.Post("/classify", "{\"input\":" + Json(g.cases[1].text) + ",\"activation\":false}");
  ASSERT_EQ(r.status, 200u) << r.body;
  ASSERT_FALSE(parser.parse(r.body).get(doc)) << r.body;
  size_t k = 0;
  for (auto p : doc["data"].at(0)["probs"].get_array()) {
    EXPECT_NEAR(p.get_double().value(), g.cases[1].logits[k++], kTol);
  }
  EXPECT_EQ(std::string_view(doc["model"].get_string().value()), GetParam());
}

TEST_P(GatewayClassify, BadBodiesNameTheFieldAndOtherRoutesAreRefused) {
  auto st = StartClassifyStack(GetParam());
  if (!st) GTEST_SKIP() << "fixture or tokenizer unavailable";
  HttpClient c(st->gateway->port());
  const auto& g = st->golden;
  std::string long_text;
  for (const auto& cs : g.cases) {
    if (!cs.is_pair && cs.text.size() > long_text.size()) long_text = cs.text;
  }
  struct Case {
    const char* route;
    std::string body;
    unsigned status;
    std::string message, param;
  };
  const std::vector<Case> cases = {
      {"/predict", "{}", 400, "'inputs' is required", "inputs"},
      {"/predict", "not json", 400, "", ""},
      {"/predict", "{\"inputs\":7}", 400, "'inputs' must be", "inputs"},
      {"/predict", "{\"inputs\":\"\"}", 400, "'inputs' is an empty string", "inputs"},
      {"/predict", "{\"inputs\":[\"one\"]}", 400, "must have 2 entries, not 1", "inputs"},
      {"/predict", "{\"inputs\":[]}", 400, "'inputs'", "inputs"},
      {"/predict", "{\"inputs\":[[\"a\",\"b\",\"c\"]]}", 400, "'inputs[0]' has 3 entries",
       "inputs"},
      {"/predict", "{\"inputs\":[[\"ok\"],5]}", 400, "'inputs[1]' must be a string", "inputs"},
      {"/predict", "{\"inputs\":[[\"ok\",\"\"]]}", 400, "'inputs[0][1]' is an empty string",
       "inputs"},
      {"/predict", "{\"inputs\":\"x\",\"raw_scores\":\"yes\"}", 400, "raw_scores", "raw_scores"},
      {"/predict",
       "{\"inputs\":[[\"a\"],[\"b\"],[\"c\"],[\"d\"],[\"e\"],[\"f\"],[\"g\"],[\"h\"],"
       "[\"i\"],[\"j\"]]}",
       413, "inputs", "inputs"},
      {"/predict", "{\"inputs\":[[\"fine\"]," + Json(long_text) + "]}", 413, "'inputs[1]' has",
       "inputs"},
      {"/classify", "{}", 400, "'input' is required", "input"},
      {"/classify", "{\"input\":3}", 400, "'input' must be", "input"},
      {"/classify", "{\"input\":[\"a\",\"\"]}", 400, "'input[1]' is an empty string", "input"},
      {"/classify", "{\"input\":[\"a\",[1,2]]}", 400, "'input[1]' must be a string", "input"},
      {"/classify", "{\"input\":\"a\",\"activation\":1}", 400, "activation", "activation"},
      {"/classify", "{\"input\":" + Json(long_text) + "}", 413, "'input[0]' has", "input"},
      // Routes for other kinds of model: 400 naming what this one serves.
      {"/v1/embeddings", "{\"input\":\"hello\"}", 400,
       "' is a sequence classifier (it labels texts and text pairs): it serves /predict and "
       "/classify; /v1/embeddings needs an embedding model",
       "model"},
      {"/embed", "{\"inputs\":\"hello\"}", 400, "/embed needs an embedding model", "model"},
      {"/rerank", "{\"query\":\"q\",\"texts\":[\"a\"]}", 400, "/rerank needs a ranking model",
       "model"},
      {"/v1/score", "{\"query\":\"q\",\"documents\":[\"a\"]}", 400,
       "/v1/score needs an embedding model, a ranking model or a multi-vector model", "model"},
  };
  for (const auto& k : cases) {
    auto r = c.Post(k.route, k.body);
    EXPECT_EQ(r.status, k.status) << k.route << " " << k.body << ": " << r.body;
    EXPECT_NE(r.body.find(k.message), std::string::npos)
        << k.route << " " << k.body << ": " << r.body;
    if (!k.param.empty()) {
      EXPECT_NE(r.body.find("\"param\":\"" + k.param + "\""), std::string::npos) << r.body;
    }
  }
  // /info says what the model is.
  auto info = c.Get("/info");
  EXPECT_NE(info.body.find("\"task\":\"classify\""), std::string::npos) << info.body;
  EXPECT_NE(info.body.find("\"labels\":[\"" + g.labels[0] + "\""), std::string::npos) << info.body;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GatewayClassify, ::testing::Values("bert-cls", "xlmr-cls"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// The classification routes on an embedding model: 400 saying what the model serves (the gateway
// decides from its own config before any server is asked).
TEST(GatewayClassifyOnEmbedder, IsRefusedSayingWhatTheModelServes) {
  auto g = testing::StartEmbedderWithoutServers("classify_on_bge");
  if (!g) GTEST_SKIP() << "no bge fixture with a tokenizer here";
  HttpClient c(g->port());
  for (const char* route : {"/predict", "/classify"}) {
    auto r = c.Post(route, "{\"inputs\":\"a\",\"input\":\"a\"}");
    EXPECT_EQ(r.status, 400u) << route;
    EXPECT_NE(r.body.find("model 'bge' is an embedding model: it serves /v1/embeddings, /embed, "
                          "/v1/contextualizedembeddings and /v1/score; " +
                          std::string(route) + " needs a sequence classifier"),
              std::string::npos)
        << r.body;
  }
}

}  // namespace
}  // namespace petal::gateway
