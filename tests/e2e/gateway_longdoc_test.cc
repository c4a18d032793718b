// End to end through a gateway and an in-process server running the FakeEngine (each pooled row
// a known function of its tokens): POST /v1/contextualizedembeddings (late chunking; windows
// with overlaps and seams for a document past the model's 256 tokens) and /v1/embeddings'
// "long_input": "mean". Expected vectors are computed here from the same tokenizer, the planner
// (span_plan.h, unit-tested in span_plan_test) and FakeEngine::Reference, so the test checks the
// plumbing: spans over the wire, one row per span, rows back in order, combination, Matryoshka
// truncation, normalisation, output types; and the errors (each naming its field).
#include <gtest/gtest.h>
#include <simdjson.h>

#include "common/file_util.h"
#include "fake_cluster.h"
#include "gateway/span_plan.h"
#include "server/fake_engine.h"
#include "wire/codec.h"

namespace petal::gateway {
namespace {

using namespace testing;

class GatewayLongDoc : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!FileExists(MiniLmDir() + "/tokenizer.json")) GTEST_SKIP() << MiniLmDir() << " is missing";
    fo_.hidden_size = 384;  // MiniLM's, which the gateway reads from the config
    fo_.vocab_size = 30522;
    server_ = std::make_unique<FakeReplica>(server::ServerOptions{}, fo_);
    GatewayOptions go;
    go.servers = {server_->address()};
    gateway_ = StartTestGateway(go);
    ASSERT_TRUE(gateway_);
    auto t = Tokenizer::FromModelDir(MiniLmDir());
    ASSERT_TRUE(t.ok());
    tok_ = std::move(t).value();
    ASSERT_TRUE(ModelSpecialTokens(*tok_, &prefix_, &suffix_).ok());
    EXPECT_EQ(prefix_, std::vector<int32_t>{101});
    EXPECT_EQ(suffix_, std::vector<int32_t>{102});
  }
  std::vector<int32_t> Ids(const std::string& text) const {
    EncodeOptions eo;
    eo.add_special_tokens = false;
    return *tok_->Encode(text, eo);
  }
  // What the gateway must answer for `plan`: FakeEngine rows of every span (raw), combined,
  // truncated to `dims` and normalised.
  std::vector<std::vector<float>> Expected(const SpanPlan& plan, int dims) const {
    std::vector<float> rows;
    server::FakeEngineOptions raw = fo_;
    raw.normalize = false;
    for (size_t k = 0; k < plan.seqs.size(); ++k) {
      for (size_t q = 0; q < plan.spans[k].size(); q += 2) {
        std::vector<int32_t> ids(plan.seqs[k].begin() + plan.spans[k][q],
                                 plan.seqs[k].begin() + plan.spans[k][q + 1]);
        auto r = server::FakeEngine::Reference(ids, raw);
        rows.insert(rows.end(), r.begin(), r.end());
      }
    }
    auto combined = CombineSpanRows(plan, rows.data(), fo_.hidden_size);
    std::vector<std::vector<float>> out;
    for (int i = 0; i < plan.outputs; ++i) {
      std::vector<float> v(combined.begin() + i * fo_.hidden_size,
                           combined.begin() + i * fo_.hidden_size + dims);
      wire::L2Normalize(v.data(), dims);
      out.push_back(v);
    }
    return out;
  }
  server::FakeEngineOptions fo_;
  std::unique_ptr<FakeReplica> server_;
  std::unique_ptr<Gateway> gateway_;
  std::unique_ptr<Tokenizer> tok_;
  std::vector<int32_t> prefix_, suffix_;
};

// data[d].data[j].embedding of a contextualized answer.
std::vector<std::vector<std::vector<float>>> Documents(const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::vector<std::vector<std::vector<float>>> out;
  if (parser.parse(body).get(doc)) return out;
  for (simdjson::dom::element d : doc["data"].get_array()) {
    EXPECT_EQ(std::string_view(d["object"]), "list");
    EXPECT_EQ(int64_t(d["index"]), static_cast<int64_t>(out.size()));
    auto& chunks = out.emplace_back();
    for (simdjson::dom::element c : d["data"].get_array()) {
      EXPECT_EQ(int64_t(c["index"]), static_cast<int64_t>(chunks.size()));
      auto& v = chunks.emplace_back();
      for (auto x : c["embedding"].get_array()) v.push_back(static_cast<float>(double(x)));
    }
  }
  return out;
}

std::string LongText(int sentences) {
  std::string t;
  for (int i = 0; i < sentences; ++i)
    t += "Sentence number " + std::to_string(i) + " talks about topic " + std::to_string(i * 7) +
         ". ";
  return t;
}

TEST_F(GatewayLongDoc, LateChunksOfShortAndWindowedDocuments) {
  const std::vector<std::vector<std::string>> docs = {
      {"Berlin is the capital of Germany.", " It has 3.8 million inhabitants."},
      {LongText(30), LongText(35), "A closing remark.", LongText(25)},  // ~730 tokens: windows
      {"One chunk."}};
  std::string body = "{\"input\":[";
  for (size_t d = 0; d < docs.size(); ++d) body += (d ? "," : "") + JsonStrings(docs[d]);
  for (int overlap : {-1, 0, 100}) {
    for (int dims : {384, 128}) {
      std::string b = body + "],\"dimensions\":" + std::to_string(dims);
      if (overlap >= 0) b += ",\"window_overlap\":" + std::to_string(overlap);
      b += "}";
      HttpClient c(gateway_->port());
      const auto r = c.Post("/v1/contextualizedembeddings", b);
      ASSERT_EQ(r.status, 200u) << r.body;
      const auto got = Documents(r.body);
      ASSERT_EQ(got.size(), docs.size());
      const int cap = 256 - 2;
      for (size_t d = 0; d < docs.size(); ++d) {
        std::vector<std::vector<int32_t>> chunks;
        for (const auto& ch : docs[d]) chunks.push_back(Ids(ch));
        const SpanPlan plan =
            PlanLateChunks(chunks, {}, prefix_, suffix_, 256, overlap >= 0 ? overlap : cap / 4);
        if (d == 1) {
          EXPECT_GE(plan.seqs.size(), 3u);  // the long document needs windows
        }
        const auto want = Expected(plan, dims);
        ASSERT_EQ(got[d].size(), want.size());
        for (size_t j = 0; j < want.size(); ++j)
          EXPECT_GT(Cosine(got[d][j], want[j]), 0.999999) << "doc " << d << " chunk " << j;
      }
    }
  }
  // int8 / base64 answers come back with one row per chunk too.
  HttpClient c(gateway_->port());
  const auto q = c.Post("/v1/contextualizedembeddings",
                        "{\"input\":[[\"a b\",\"c d\"]],\"output_dtype\":\"int8\","
                        "\"encoding_format\":\"base64\"}");
  ASSERT_EQ(q.status, 200u) << q.body;
  EXPECT_NE(q.body.find("\"scale\":"), std::string::npos);
}

TEST_F(GatewayLongDoc, ErrorsNameTheirField) {
  HttpClient c(gateway_->port());
  auto expect = [&](const std::string& body, unsigned status, const std::string& text) {
    const auto r = c.Post("/v1/contextualizedembeddings", body);
    EXPECT_EQ(r.status, status) << body << " -> " << r.body;
    EXPECT_NE(r.body.find(text), std::string::npos) << r.body;
  };
  expect("{\"input\":[[\"a\"],[]]}", 400, "'input[1]' is an empty document");
  expect("{\"input\":[[\"a\",\"\"]]}", 400, "'input[0][1]' is an empty chunk");
  expect("{\"input\":[]}", 400, "'input' must not be empty");
  expect("{\"input\":\"text\"}", 400, "\"param\":\"input\"");
  expect("{\"input\":[[\"a\",3]]}", 400, "'input[0][1]' must be a string");
  expect("{\"input\":[[\"a\"]],\"window_overlap\":254}", 400, "window_overlap");
  expect("{\"input\":[[\"a\"]],\"window_overlap\":-1}", 400, "window_overlap");
  expect("{\"input\":[[\"a\"]],\"dimensions\":999}", 400, "dimensions");
  std::string many = "{\"input\":[";
  for (int i = 0; i < 513; ++i) many += i ? ",[\"x\"]" : "[\"x\"]";
  expect(many + "]}", 413, "512");
  std::string chunks = "{\"input\":[[";
  for (int i = 0; i < 1025; ++i) chunks += i ? ",\"x\"" : "\"x\"";
  expect(chunks + "]]}", 413, "1024");
  std::string huge = "{\"input\":[[";
  for (int i = 0; i < 40; ++i) huge += (i ? "," : "") + JsonString(LongText(800));  // ~330K tokens
  expect(huge + "]]}", 413, "262144");
}

TEST_F(GatewayLongDoc, LongInputMeanOnEmbeddings) {
  HttpClient c(gateway_->port());
  const std::string text = LongText(90);  // ~720 tokens, past MiniLM's 256
  // The default stays the clear 413, which now names the opt-in.
  const auto refused = c.Post("/v1/embeddings", "{\"input\":" + JsonString(text) + "}");
  EXPECT_EQ(refused.status, 413u);
  EXPECT_NE(refused.body.find("long_input"), std::string::npos) << refused.body;
  const auto r = c.Post("/v1/embeddings", "{\"input\":[" + JsonString(text) +
                                              ",\"short one\"],\"long_input\":\"mean\"}");
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto got = Embeddings(r.body);
  ASSERT_EQ(got.size(), 2u);
  SpanPlan plan = PlanLongInput(Ids(text), prefix_, suffix_, 256);
  EXPECT_EQ(plan.seqs.size(), 3u);
  plan.Append(PlanLongInput(Ids("short one"), prefix_, suffix_, 256));
  const auto want = Expected(plan, 384);
  EXPECT_GT(Cosine(got[0], want[0]), 0.999999);
  EXPECT_GT(Cosine(got[1], want[1]), 0.999999);
  // A short input through long_input is its ordinary embedding.
  const auto plain = c.Post("/v1/embeddings", "{\"input\":\"short one\"}");
  ASSERT_EQ(plain.status, 200u);
  EXPECT_GT(Cosine(Embeddings(plain.body)[0], got[1]), 0.999999);
  const auto both = c.Post("/v1/embeddings",
                           "{\"input\":\"a\",\"long_input\":\"mean\","
                           "\"truncate\":true}");
  EXPECT_EQ(both.status, 400u);
  EXPECT_EQ(c.Post("/v1/embeddings", "{\"input\":\"a\",\"long_input\":\"max\"}").status, 400u);
}

}  // namespace
}  // namespace petal::gateway
