// End-to-end test of the server on the real all-MiniLM-L6-v2 weights with the CPU engine
// (skipped if models/all-MiniLM-L6-v2 is absent): concurrent clients sending the golden cases in
// mixed request sizes get the sentence-transformers embeddings back, row for row.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <cmath>
#include <thread>

#include "common/file_util.h"
#include "engine/engine_factory.h"
#include "server/server.h"
#include "wire/client.h"
#include "wire/codec.h"

namespace petal::server {
namespace {

using namespace std::chrono_literals;

struct GoldenCase {
  std::vector<int32_t> ids;
  std::vector<float> embedding;
};

std::string SourceDir() {
  const char* s = std::getenv("PETAL_SOURCE_DIR");
  return s ? s : ".";
}

std::vector<GoldenCase> LoadGolden(const std::string& path) {
  std::vector<GoldenCase> out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.load(path).get(doc)) return out;
  for (simdjson::dom::element c : doc["cases"].get_array()) {
    GoldenCase g;
    for (simdjson::dom::element v : c["ids"].get_array())
      g.ids.push_back(static_cast<int32_t>(int64_t(v)));
    for (simdjson::dom::element v : c["embedding"].get_array())
      g.embedding.push_back(static_cast<float>(double(v)));
    out.push_back(std::move(g));
  }
  return out;
}

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  EXPECT_GE(Cosine(got, want), 0.99999) << what;
  float worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
  EXPECT_LE(worst, 1e-4f) << what;
}

TEST(ServerMiniLm, ConcurrentClientsGetGoldenEmbeddings) {
  const std::string dir = SourceDir() + "/models/all-MiniLM-L6-v2";
  if (!FileExists(dir + "/model.safetensors")) GTEST_SKIP() << dir << " is missing";
  auto golden = LoadGolden(SourceDir() + "/tests/fixtures/golden_all-MiniLM-L6-v2.json");
  ASSERT_GT(golden.size(), 10u);
  // A subset keeps the test within its time budget on a loaded CI machine.
  if (golden.size() > 32) golden.resize(32);

  EngineOptions eo;
  eo.backend = "cpu";
  eo.cpu.precision = "fp32";  // the fp32 goldens: auto may pick bf16
  auto engine = CreateEngine(dir, eo);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  ServerOptions so;
  so.listen = "127.0.0.1:0";
  so.loop.limits = {256, 8};  // requests spread over several batches
  auto srv = EmbedServer::Start(so);
  ASSERT_TRUE(srv.ok()) << srv.status().ToString();
  (*srv)->AttachEngine(std::move(engine).value());
  const std::string addr = "127.0.0.1:" + std::to_string((*srv)->port());

  auto info = wire::EmbedClient(addr).ModelInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->hidden_size(), 384u);
  EXPECT_EQ(info->max_tokens(), 512u);
  EXPECT_EQ(info->max_seq_length(), 256u);
  EXPECT_TRUE(info->normalize());

  constexpr int kClients = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      wire::EmbedClient client(addr);
      std::vector<size_t> mine;
      for (size_t i = t; i < golden.size(); i += kClients) mine.push_back(i);
      // Requests of 1, 2, 3, ... sequences.
      for (size_t start = 0, k = 1; start < mine.size(); start += k, ++k) {
        std::vector<std::vector<int32_t>> seqs;
        std::vector<size_t> which;
        for (size_t j = start; j < std::min(mine.size(), start + k); ++j) {
          seqs.push_back(golden[mine[j]].ids);
          which.push_back(mine[j]);
        }
        auto resp = client.Embed(wire::MakeEmbedRequest(seqs), 20000ms);
        ASSERT_TRUE(resp.ok()) << resp.status().ToString();
        auto rows = wire::DecodeEmbeddings(*resp);
        ASSERT_TRUE(rows.ok());
        ASSERT_EQ(rows->size(), which.size());
        for (size_t r = 0; r < which.size(); ++r) {
          ExpectClose((*rows)[r], golden[which[r]].embedding, "case " + std::to_string(which[r]));
        }
      }
    });
  }
  for (auto& th : threads) th.join();

  // Matryoshka: the first 128 dimensions, re-normalised.
  v1::EmbedOptions opts;
  opts.set_dimensions(128);
  auto resp =
      wire::EmbedClient(addr).Embed(wire::MakeEmbedRequest({golden[0].ids, golden[1].ids}, opts));
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  auto rows = wire::DecodeEmbeddings(*resp);
  ASSERT_TRUE(rows.ok());
  for (int r = 0; r < 2; ++r) {
    std::vector<float> want(golden[r].embedding.begin(), golden[r].embedding.begin() + 128);
    wire::L2Normalize(want.data(), 128);
    ExpectClose((*rows)[r], want, "matryoshka row " + std::to_string(r));
  }
  (*srv)->Shutdown(2s);
}

}  // namespace
}  // namespace petal::server
