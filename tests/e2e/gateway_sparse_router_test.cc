// End-to-end test of an inference-free SPLADE model (a sentence-transformers Router: the "query"
// route a SparseStaticEmbedding, the "document" route MLMTransformer + SpladePooling), on the
// bert-splade-router fixture (tests/fixtures/classify/, made by scripts/ref/splade_router_golden.py
// with SparseEncoder itself): query texts (prompt_name / input_type "query") are encoded in the
// gateway (exact: same index set, values within 1e-6), documents by two CPU servers (fp32, within
// 1e-5 of encode_document). The document transformer is the bert-splade fixture's seeded folder,
// copied into the Router's document_0_MLMTransformer/ here. Thread-safety: single-threaded test.
#include <gtest/gtest.h>

#include <simdjson.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <vector>

#include "classify_stack.h"
#include "common/file_util.h"
#include "gateway_test_util.h"
#include "splade_router_fixture.h"

namespace petal::gateway {
namespace {

using testing::HttpClient;
using testing::Json;

using ::petal::testing::LoadRouterGolden;
using ::petal::testing::ReadSparse;
using ::petal::testing::RouterFolder;
using ::petal::testing::RouterGolden;
using ::petal::testing::Sparse;

// Each input's entries of a TEI (/embed_sparse) or OpenAI (/v1/embeddings) answer.
std::vector<Sparse> Parse(const std::string& body, bool openai) {
  std::vector<Sparse> out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  EXPECT_FALSE(parser.parse(body).get(doc)) << body.substr(0, 200);
  if (openai) {
    for (auto d : doc["data"].get_array()) out.push_back(ReadSparse(d["embedding"]));
    return out;
  }
  for (auto list : doc.get_array()) {
    Sparse s;
    for (auto e : list.get_array()) {
      s.indices.push_back(e["index"].get_int64().value());
      s.values.push_back(e["value"].get_double().value());
    }
    out.push_back(s);
  }
  return out;
}

void ExpectExact(const std::vector<Sparse>& got, const std::vector<Sparse>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].indices, want[i].indices) << what << " text " << i;
    ASSERT_EQ(got[i].values.size(), want[i].values.size()) << what << " text " << i;
    for (size_t k = 0; k < got[i].values.size(); ++k) {
      EXPECT_NEAR(got[i].values[k], want[i].values[k], 1e-6) << what << " text " << i;
    }
  }
}

std::string TextsJson(const RouterGolden& g) {
  std::string t = "[";
  for (size_t i = 0; i < g.texts.size(); ++i) t += (i ? "," : "") + Json(g.texts[i]);
  return t + "]";
}

// Queries: the static module in the gateway, as SparseEncoder.encode_query (with
// max_active_dims too), through prompt_name on /embed_sparse and input_type on /v1/embeddings.
TEST(GatewaySparseRouter, QueriesAreTheStaticModulesVectors) {
  auto st = testing::StartClassifyStack("bert-splade", RouterFolder);
  if (!st) GTEST_SKIP() << "fixture or tokenizer unavailable";
  const RouterGolden g = LoadRouterGolden();
  ASSERT_FALSE(g.texts.empty());
  HttpClient c(st->gateway->port());
  const std::string texts = TextsJson(g);
  auto r = c.Post("/embed_sparse",
                  "{\"inputs\":" + texts + ",\"truncate\":true,\"prompt_name\":\"query\"}");
  ASSERT_EQ(r.status, 200u) << r.body.substr(0, 300);
  ExpectExact(Parse(r.body, false), g.query, "prompt_name query");
  auto o = c.Post("/v1/embeddings", "{\"input\":" + texts +
                                        ",\"sparse\":true,\"truncate\":true,"
                                        "\"input_type\":\"query\"}");
  ASSERT_EQ(o.status, 200u) << o.body.substr(0, 300);
  ExpectExact(Parse(o.body, true), g.query, "input_type query");
  auto k = c.Post("/embed_sparse", "{\"inputs\":" + texts +
                                       ",\"truncate\":true,\"prompt_name\":\"query\","
                                       "\"max_active_dims\":3}");
  ASSERT_EQ(k.status, 200u) << k.body.substr(0, 300);
  ExpectExact(Parse(k.body, false), g.query_top3, "max_active_dims 3");
}

// Documents (no route named, or "document"): the engine, as SparseEncoder.encode_document.
TEST(GatewaySparseRouter, DocumentsGoToTheEngine) {
  auto st = testing::StartClassifyStack("bert-splade", RouterFolder);
  if (!st) GTEST_SKIP() << "fixture or tokenizer unavailable";
  const RouterGolden g = LoadRouterGolden();
  HttpClient c(st->gateway->port());
  const std::string texts = TextsJson(g);
  for (const char* extra : {"", ",\"prompt_name\":\"document\""}) {
    auto r = c.Post("/embed_sparse", "{\"inputs\":" + texts + ",\"truncate\":true" + extra + "}");
    ASSERT_EQ(r.status, 200u) << r.body.substr(0, 300);
    const auto got = Parse(r.body, false);
    ASSERT_EQ(got.size(), g.texts.size());
    for (size_t i = 0; i < got.size(); ++i) {
      std::map<int64_t, double> entries;
      double sum = 0;
      for (size_t e = 0; e < got[i].indices.size(); ++e) {
        entries[got[i].indices[e]] = got[i].values[e];
        sum += got[i].values[e];
      }
      EXPECT_LE(std::abs(static_cast<int64_t>(entries.size()) - g.doc_nnz[i]), g.doc_near_zero[i])
          << i;
      EXPECT_NEAR(sum, g.doc_sum[i], 1e-5 * std::abs(g.doc_sum[i])) << i;
      for (size_t t = 0; t < g.doc_top[i].indices.size(); ++t) {
        EXPECT_NEAR(entries[g.doc_top[i].indices[t]], g.doc_top[i].values[t], 1e-5) << i;
      }
    }
  }
}

// Errors on the query path stay 400s naming the field; too long without truncate is a 413.
TEST(GatewaySparseRouter, QueryErrorsAreClear) {
  auto st = testing::StartClassifyStack("bert-splade", RouterFolder);
  if (!st) GTEST_SKIP() << "fixture or tokenizer unavailable";
  HttpClient c(st->gateway->port());
  auto empty = c.Post("/embed_sparse", R"({"inputs":["a",""],"prompt_name":"query"})");
  EXPECT_EQ(empty.status, 400u);
  EXPECT_NE(empty.body.find("inputs[1]"), std::string::npos) << empty.body;
  auto dims = c.Post("/v1/embeddings",
                     R"({"input":"a","sparse":true,"input_type":"query","dimensions":8})");
  EXPECT_EQ(dims.status, 400u);
  EXPECT_NE(dims.body.find("dimensions"), std::string::npos) << dims.body;
  auto ids = c.Post("/embed_sparse", R"({"inputs":[[1,2,99999999]],"prompt_name":"query"})");
  EXPECT_EQ(ids.status, 400u) << ids.body;
  std::string long_text;
  for (int i = 0; i < 80; ++i) long_text += "word ";
  auto too_long =
      c.Post("/embed_sparse", "{\"inputs\":" + Json(long_text) + ",\"prompt_name\":\"query\"}");
  EXPECT_EQ(too_long.status, 413u) << too_long.body;
  auto unknown = c.Post("/embed_sparse", R"({"inputs":"x","prompt_name":"nope"})");
  EXPECT_EQ(unknown.status, 400u);
}

}  // namespace
}  // namespace petal::gateway
