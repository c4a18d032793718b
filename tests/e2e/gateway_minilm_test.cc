// End-to-end test of the gateway on the real all-MiniLM-L6-v2 (skipped if
// models/all-MiniLM-L6-v2 is absent): an in-process inference server with the CPU engine, the
// gateway in front of it on a loopback port, and real HTTP requests. Texts and token ids must
// give the sentence-transformers golden embeddings; the error cases give the documented codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "common/file_util.h"
#include "engine/engine_factory.h"
#include "gateway/gateway.h"
#include "gateway_test_util.h"
#include "server/server.h"

namespace petal::gateway {
namespace {

using namespace testing;

struct GoldenCase {
  std::string text;
  std::string ids;  // JSON array text
  std::vector<float> embedding;
  bool truncated = false;
};

std::vector<GoldenCase> LoadGolden(size_t max_cases) {
  std::vector<GoldenCase> out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.load(SourceDir() + "/tests/fixtures/golden_all-MiniLM-L6-v2.json").get(doc))
    return out;
  for (simdjson::dom::element c : doc["cases"].get_array()) {
    GoldenCase g;
    g.text = std::string(std::string_view(c["text"]));
    g.truncated = bool(c["truncated"]);
    g.ids = "[";
    for (simdjson::dom::element v : c["ids"].get_array()) {
      g.ids += (g.ids.size() > 1 ? "," : "") + std::to_string(int64_t(v));
    }
    g.ids += "]";
    for (simdjson::dom::element v : c["embedding"].get_array())
      g.embedding.push_back(static_cast<float>(double(v)));
    out.push_back(std::move(g));
    if (out.size() == max_cases) break;
  }
  return out;
}

class GatewayMiniLm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = SourceDir() + "/models/all-MiniLM-L6-v2";
    if (!FileExists(dir + "/model.safetensors")) return;
    EngineOptions eo;
    eo.backend = "cpu";
    eo.cpu.precision = "fp32";  // the fp32 goldens: auto may pick bf16
    auto engine = CreateEngine(dir, eo);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    server::ServerOptions so;
    so.listen = "127.0.0.1:0";
    auto srv = server::EmbedServer::Start(so);
    ASSERT_TRUE(srv.ok()) << srv.status().ToString();
    server_ = std::move(srv).value().release();
    server_->AttachEngine(std::move(engine).value());
    GatewayOptions go;
    go.model_dir = dir;
    go.servers = {"127.0.0.1:" + std::to_string(server_->port())};
    go.listen = "127.0.0.1:0";
    go.chunk = {8, 4096};  // small chunks so that list requests really are split
    auto g = Gateway::Start(go);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    gateway_ = std::move(g).value().release();
  }
  static void TearDownTestSuite() {
    delete gateway_;
    if (server_) server_->Shutdown(std::chrono::milliseconds(1000));
    delete server_;
    gateway_ = nullptr;
    server_ = nullptr;
  }
  void SetUp() override {
    if (gateway_ == nullptr) GTEST_SKIP() << "models/all-MiniLM-L6-v2 is missing";
    client_ = std::make_unique<HttpClient>(gateway_->port());
  }

  static server::EmbedServer* server_;
  static Gateway* gateway_;
  std::unique_ptr<HttpClient> client_;
};
server::EmbedServer* GatewayMiniLm::server_ = nullptr;
Gateway* GatewayMiniLm::gateway_ = nullptr;

TEST_F(GatewayMiniLm, StringAndListOfStringsMatchGolden) {
  auto golden = LoadGolden(12);
  ASSERT_GE(golden.size(), 8u);
  // One string.
  auto r = client_->Post("/v1/embeddings",
                         "{\"input\":" + JsonString(golden[0].text) + ",\"model\":\"mini\"}");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_NE(r.body.find("\"model\":\"mini\""), std::string::npos);
  EXPECT_NE(r.body.find("\"usage\":{\"prompt_tokens\":"), std::string::npos);
  auto rows = Embeddings(r.body);
  ASSERT_EQ(rows.size(), 1u) << r.body.substr(0, 300);
  EXPECT_GE(Cosine(rows[0], golden[0].embedding), 0.99999);
  // A list, split into several chunks, answered in order (same connection: keep-alive).
  std::vector<std::string> texts;
  for (const auto& g : golden) texts.push_back(g.text);
  r = client_->Post("/v1/embeddings", "{\"input\":" + JsonStrings(texts) + ",\"truncate\":true}");
  ASSERT_EQ(r.status, 200u) << r.body;
  rows = Embeddings(r.body);
  ASSERT_EQ(rows.size(), golden.size());
  for (size_t i = 0; i < golden.size(); ++i) {
    EXPECT_GE(Cosine(rows[i], golden[i].embedding), 0.99999) << "case " << i;
  }
  EXPECT_EQ(client_->connections(), 1);
}

TEST_F(GatewayMiniLm, TokenIdsBase64AndDimensions) {
  auto golden = LoadGolden(3);
  ASSERT_EQ(golden.size(), 3u);
  // Arrays of token ids are sent as they are (no special tokens added).
  auto r =
      client_->Post("/v1/embeddings", "{\"input\":[" + golden[1].ids + "," + golden[2].ids + "]}");
  ASSERT_EQ(r.status, 200u) << r.body;
  auto rows = Embeddings(r.body);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_GE(Cosine(rows[0], golden[1].embedding), 0.99999);
  EXPECT_GE(Cosine(rows[1], golden[2].embedding), 0.99999);
  // One sequence of ids.
  r = client_->Post("/v1/embeddings", "{\"input\":" + golden[1].ids + "}");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_GE(Cosine(Embeddings(r.body).at(0), golden[1].embedding), 0.99999);

  // base64: little-endian float32, the same values as the float answer.
  r = client_->Post("/v1/embeddings", "{\"input\":" + JsonString(golden[1].text) +
                                          ",\"encoding_format\":\"base64\"}");
  ASSERT_EQ(r.status, 200u) << r.body;
  const size_t at = r.body.find("\"embedding\":\"");
  ASSERT_NE(at, std::string::npos) << r.body;
  const std::string b64 = r.body.substr(at + 13, r.body.find('"', at + 13) - at - 13);
  std::string bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : b64) {
    if (c == '=') break;
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    acc = (acc << 6) | static_cast<uint32_t>(std::strchr(alphabet, c) - alphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  ASSERT_EQ(bytes.size(), golden[1].embedding.size() * 4);
  std::vector<float> decoded(golden[1].embedding.size());
  std::memcpy(decoded.data(), bytes.data(), bytes.size());
  EXPECT_GE(Cosine(decoded, golden[1].embedding), 0.99999);

  // Matryoshka dimensions: the first 64, re-normalised.
  r = client_->Post("/v1/embeddings",
                    "{\"input\":" + JsonString(golden[1].text) + ",\"dimensions\":64}");
  ASSERT_EQ(r.status, 200u) << r.body;
  rows = Embeddings(r.body);
  ASSERT_EQ(rows.at(0).size(), 64u);
  std::vector<float> head(golden[1].embedding.begin(), golden[1].embedding.begin() + 64);
  EXPECT_GE(Cosine(rows[0], head), 0.99999);
  double norm = 0;
  for (float x : rows[0]) norm += double(x) * x;
  EXPECT_NEAR(norm, 1.0, 1e-4);
}

TEST_F(GatewayMiniLm, ErrorsHaveTheDocumentedCodes) {
  auto r = client_->Post("/v1/embeddings", "{\"input\": [\"a\",");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("not valid JSON"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"type\":\"invalid_request_error\""), std::string::npos) << r.body;
  r = client_->Post("/v1/embeddings", "{\"model\":\"x\"}");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("\"param\":\"input\""), std::string::npos) << r.body;
  r = client_->Post("/v1/embeddings", "{\"input\":[\"ok\", 7]}");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("input[1]"), std::string::npos) << r.body;
  std::string long_text;
  for (int i = 0; i < 400; ++i) long_text += "word ";
  r = client_->Post("/v1/embeddings", "{\"input\":[\"short\"," + JsonString(long_text) + "]}");
  EXPECT_EQ(r.status, 413u);
  EXPECT_NE(r.body.find("input[1]"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("402 tokens"), std::string::npos) << r.body;
  // The same text with truncation allowed (TEI's /embed) is fine.
  r = client_->Post("/embed", "{\"inputs\":" + JsonString(long_text) + ",\"truncate\":true}");
  EXPECT_EQ(r.status, 200u) << r.body;
  std::string many = "{\"input\":[";
  for (int i = 0; i < 2049; ++i) many += i ? ",\"a\"" : "\"a\"";
  r = client_->Post("/v1/embeddings", many + "]}");
  EXPECT_EQ(r.status, 413u);
  r = client_->Post("/v1/embeddings", "{\"input\":[\"a\",\"\"]}");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("input[1]' is an empty string"), std::string::npos) << r.body;
  // Large requests are tokenized in parallel slices; the first bad input is still the one named.
  std::vector<std::string> texts(100, "fine");
  texts[80] = "";
  r = client_->Post("/v1/embeddings", "{\"input\":" + JsonStrings(texts) + "}");
  EXPECT_NE(r.body.find("input[80]' is an empty string"), std::string::npos) << r.body;
  texts[10] = "";
  r = client_->Post("/v1/embeddings", "{\"input\":" + JsonStrings(texts) + "}");
  EXPECT_NE(r.body.find("input[10]' is an empty string"), std::string::npos) << r.body;
  r = client_->Post("/v1/embeddings", "{\"input\":\"a\",\"input_type\":\"question\"}");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("\"param\":\"input_type\""), std::string::npos) << r.body;
  r = client_->Post("/v1/embeddings", "{\"input\":\"a\",\"dimensions\":4096}");
  EXPECT_EQ(r.status, 400u);
  EXPECT_NE(r.body.find("\"param\":\"dimensions\""), std::string::npos) << r.body;
  r = client_->Get("/no/such/route");
  EXPECT_EQ(r.status, 404u);
  r = client_->Get("/v1/embeddings");
  EXPECT_EQ(r.status, 405u);
  // The connection survived every error.
  EXPECT_EQ(client_->Get("/health").status, 200u);
}

TEST_F(GatewayMiniLm, ManyInputsComeBackInOrder) {
  std::vector<std::string> texts;
  for (int i = 0; i < 300; ++i) texts.push_back("sentence number " + std::to_string(i));
  auto r = client_->Post("/v1/embeddings", "{\"input\":" + JsonStrings(texts) + "}");
  ASSERT_EQ(r.status, 200u) << r.body.substr(0, 300);
  auto rows = Embeddings(r.body);
  ASSERT_EQ(rows.size(), 300u);
  for (int i : {0, 7, 8, 150, 299}) {
    auto one = client_->Post("/v1/embeddings", "{\"input\":" + JsonString(texts[i]) + "}");
    ASSERT_EQ(one.status, 200u);
    EXPECT_GE(Cosine(rows[i], Embeddings(one.body).at(0)), 0.99999) << "row " << i;
  }
  // Rows of different texts differ (a reordering would not go unnoticed).
  EXPECT_LT(Cosine(rows[7], rows[8]), 0.9999);
}

TEST_F(GatewayMiniLm, OtherRoutes) {
  EXPECT_EQ(client_->Get("/health").status, 200u);
  EXPECT_EQ(client_->Get("/ready").status, 200u);
  auto r = client_->Get("/v1/models");
  EXPECT_EQ(r.status, 200u);
  EXPECT_NE(r.body.find("\"id\":\"all-MiniLM-L6-v2\""), std::string::npos) << r.body;
  r = client_->Post("/tokenize", "{\"inputs\":\"Hello, world\"}");
  EXPECT_EQ(r.status, 200u);
  EXPECT_NE(r.body.find("{\"id\":7592,\"text\":\"hello\"}"), std::string::npos) << r.body;
  r = client_->Post("/embed", "{\"inputs\":[\"a\",\"b\"],\"output_dtype\":\"int8\"}");
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.body.substr(0, 2), "[[");
  r = client_->Post("/v1/score",
                    "{\"query\":\"What is the capital of France?\",\"documents\":[\"Bananas are "
                    "yellow.\",\"Paris is the capital of France.\"],\"top_k\":1}");
  EXPECT_EQ(r.status, 200u);
  EXPECT_NE(r.body.find("\"index\":1"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("\"index\":0"), std::string::npos) << r.body;
  r = client_->Get("/metrics");
  EXPECT_EQ(r.status, 200u);
  // A model's samples carry its name (several models can share a gateway).
  EXPECT_NE(r.body.find("petal_gateway_requests_total{model=\"all-MiniLM-L6-v2\",route=\"/v1/"
                        "embeddings\",status=\"200\"}"),
            std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find("petal_gateway_replica_up{"), std::string::npos);
  EXPECT_NE(r.body.find("petal_server_"), std::string::npos);
}

// Flow control on the CPU engine: 4 clients, each with multi-chunk requests of golden texts,
// against a server whose queue holds 2 requests / 100 tokens: every answer is 200 with the golden
// vectors (the gateway held and resent the chunks the server refused).
TEST(GatewayMiniLmFlow, ManyClientsAgainstASmallServerBoundGetNoErrors) {
  const std::string dir = SourceDir() + "/models/all-MiniLM-L6-v2";
  if (!FileExists(dir + "/model.safetensors")) GTEST_SKIP() << "no MiniLM";
  auto golden = LoadGolden(12);
  ASSERT_GE(golden.size(), 8u);
  // The six shortest cases keep the CPU work (and the test) small.
  std::stable_sort(golden.begin(), golden.end(),
                   [](const auto& a, const auto& b) { return a.ids.size() < b.ids.size(); });
  golden.resize(6);
  EngineOptions eo;
  eo.backend = "cpu";
  eo.cpu.precision = "fp32";  // the fp32 goldens: auto may pick bf16
  auto engine = CreateEngine(dir, eo);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  server::ServerOptions so;
  so.listen = "127.0.0.1:0";
  so.loop.max_queue_requests = 2;
  so.loop.max_queue_tokens = 100;
  auto srv = server::EmbedServer::Start(so);
  ASSERT_TRUE(srv.ok()) << srv.status().ToString();
  (*srv)->AttachEngine(std::move(engine).value());
  GatewayOptions go;
  go.model_dir = dir;
  go.servers = {"127.0.0.1:" + std::to_string((*srv)->port())};
  go.listen = "127.0.0.1:0";
  go.chunk = {4, 64};
  auto g = Gateway::Start(go);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      HttpClient http((*g)->port(), std::chrono::seconds(120));  // a loaded CI machine is slow
      for (int r = 0; r < 2; ++r) {
        // 16 golden texts (as ids, so the CPU engine does all the work), rotated per request.
        std::string body = "{\"input\":[";
        std::vector<size_t> which;
        for (int i = 0; i < 16; ++i) {
          which.push_back((c * 5 + r * 3 + i) % golden.size());
          body += (i ? "," : "") + golden[which.back()].ids;
        }
        auto res = http.Post("/v1/embeddings", body + "]}");
        auto rows = res.status == 200 ? Embeddings(res.body) : std::vector<std::vector<float>>{};
        bool good = rows.size() == which.size();
        for (size_t i = 0; good && i < rows.size(); ++i) {
          good = Cosine(rows[i], golden[which[i]].embedding) >= 0.99999;
        }
        (good ? ok : bad)++;
        if (!good) ADD_FAILURE() << res.status << " " << res.body.substr(0, 200);
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(ok.load(), 8);
  auto st = wire::EmbedClient(go.servers[0]).Stats();
  ASSERT_TRUE(st.ok());
  EXPECT_GT(st->requests_rejected(), 0u) << "the server's bound was never reached";
  g->reset();
  (*srv)->Shutdown(std::chrono::milliseconds(1000));
}

}  // namespace
}  // namespace petal::gateway
