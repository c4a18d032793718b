// End-to-end tests of the gateway's chunking, balancing and failure handling against in-process
// servers running the deterministic FakeEngine (rows are a known function of the token ids), so
// order and routing can be checked exactly. The gateway still needs a tokenizer and config: it
// uses models/all-MiniLM-L6-v2 and skips if that is absent. The flow-control cases are in
// gateway_flow_test.cc (the same executable).
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "gateway_fake_fixture.h"

namespace petal::gateway {
namespace {

using namespace testing;
using namespace std::chrono_literals;

TEST_F(GatewayFake, ChunksSpreadOverReplicasAndComeBackInOrder) {
  FakeServer a, b;
  auto g = StartGateway({a.address(), b.address()}, {16, 100000});
  ASSERT_TRUE(g);
  for (const auto& r : g->replicas().Snapshot()) EXPECT_TRUE(r.up) << r.address;
  std::vector<std::vector<int32_t>> seqs;
  const std::string input = Sequences(300, &seqs);
  HttpClient c(g->port());
  auto r = c.Post("/v1/embeddings", "{\"input\":" + input + "}");
  ASSERT_EQ(r.status, 200u) << r.body.substr(0, 300);
  auto rows = Embeddings(r.body);
  ASSERT_EQ(rows.size(), 300u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto want = server::FakeEngine::Reference(seqs[i], a.engine_options);
    ASSERT_GE(Cosine(rows[i], want), 0.99999) << "row " << i;
  }
  // 19 chunks of at most 16 sequences, over both replicas.
  int sa = 0, sb = 0;
  for (const auto& bt : a.engine->batches()) sa += bt.num_seqs;
  for (const auto& bt : b.engine->batches()) sb += bt.num_seqs;
  EXPECT_EQ(sa + sb, 300);
  EXPECT_GT(sa, 0);
  EXPECT_GT(sb, 0);
  EXPECT_NE(r.body.find("\"total_tokens\":"), std::string::npos);
}

TEST_F(GatewayFake, ReplicaDownIsRetriedElsewhereThenReadyFails) {
  FakeServer a, b;
  auto g = StartGateway({a.address(), b.address()}, {4, 100000});
  ASSERT_TRUE(g);
  HttpClient c(g->port());
  EXPECT_EQ(c.Get("/ready").status, 200u);
  a.Stop();  // not yet noticed by the health checker: calls to it fail and are retried on b
  std::vector<std::vector<int32_t>> seqs;
  const std::string input = Sequences(40, &seqs);
  auto r = c.Post("/v1/embeddings", "{\"input\":" + input + "}");
  ASSERT_EQ(r.status, 200u) << r.body.substr(0, 300);
  EXPECT_EQ(Embeddings(r.body).size(), 40u);
  EXPECT_EQ(c.Get("/ready").status, 200u);
  b.Stop();
  // The health checker notices within a few intervals.
  unsigned ready = 0;
  for (int i = 0; i < 50 && ready != 503; ++i) {
    std::this_thread::sleep_for(50ms);
    ready = c.Get("/ready").status;
  }
  EXPECT_EQ(ready, 503u);
  EXPECT_EQ(c.Get("/health").status, 200u);
  r = c.Post("/v1/embeddings", "{\"input\":[[1,2,3]]}");
  EXPECT_EQ(r.status, 503u) << r.body;
  EXPECT_NE(r.body.find("\"error\""), std::string::npos);
}

// reply_poll_us < 0: gRPC's callbacks deliver the answers; >= 0: the gateway's ReplyPoller.
void ReplicaKilledUnderLoad(int reply_poll_us) {
  FakeServer a, b;
  auto g = StartGateway({a.address(), b.address()}, {8, 100000}, {}, 32u << 20, reply_poll_us);
  ASSERT_TRUE(g);
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      HttpClient c(g->port());
      std::vector<std::vector<int32_t>> seqs;
      const std::string body = "{\"input\":" + Sequences(20 + t, &seqs) + "}";
      while (!stop) {
        auto r = c.Post("/v1/embeddings", body);
        const bool good = r.status == 200 && Embeddings(r.body).size() == seqs.size();
        (good ? ok : failed)++;
        if (!good) ADD_FAILURE() << r.status << " " << r.body.substr(0, 200);
      }
    });
  }
  std::this_thread::sleep_for(200ms);
  a.Stop();  // chunks in flight or sent to it before the health check notices are retried on b
  std::this_thread::sleep_for(500ms);
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_GT(ok.load(), 10);
  EXPECT_EQ(failed.load(), 0);
}

TEST_F(GatewayFake, ReplicaKilledUnderLoadLosesNoRequest) { ReplicaKilledUnderLoad(-1); }
TEST_F(GatewayFake, ReplicaKilledUnderLoadLosesNoRequestWithReplyPoller) {
  ReplicaKilledUnderLoad(0);
}

TEST_F(GatewayFake, ReplicaThatComesBackIsUsedAgain) {
  auto a = std::make_unique<FakeServer>();
  auto g = StartGateway({a->address()});
  ASSERT_TRUE(g);
  HttpClient c(g->port());
  a->Stop();
  EXPECT_EQ(c.Post("/v1/embeddings", "{\"input\":[[1,2]]}").status, 503u);
  // Long enough for gRPC's reconnect backoff to grow past the health interval.
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(c.Get("/ready").status, 503u);
  a->Start();  // on the same port
  unsigned ready = 0;
  const auto start = std::chrono::steady_clock::now();
  while (ready != 200 && std::chrono::steady_clock::now() - start < 3s) {
    std::this_thread::sleep_for(50ms);
    ready = c.Get("/ready").status;
  }
  EXPECT_EQ(ready, 200u);
  EXPECT_EQ(c.Post("/v1/embeddings", "{\"input\":[[1,2]]}").status, 200u);
}

TEST_F(GatewayFake, ApiKeysAreChecked) {
  FakeServer a;
  auto g = StartGateway({a.address()}, {}, {"k1", "k2"});
  ASSERT_TRUE(g);
  HttpClient c(g->port());
  EXPECT_EQ(c.Get("/health").status, 200u);  // probes need no key
  auto r = c.Post("/v1/embeddings", "{\"input\":[[1,2]]}");
  EXPECT_EQ(r.status, 401u);
  EXPECT_NE(r.body.find("authentication_error"), std::string::npos) << r.body;
  c.SetApiKey("wrong");
  EXPECT_EQ(c.Post("/v1/embeddings", "{\"input\":[[1,2]]}").status, 401u);
  c.SetApiKey("k2");
  EXPECT_EQ(c.Post("/v1/embeddings", "{\"input\":[[1,2]]}").status, 200u);
}

void ConcurrentClientsGetTheirOwnRows(int reply_poll_us) {
  FakeServer a, b;
  auto g = StartGateway({a.address(), b.address()}, {3, 100000}, {}, 32u << 20, reply_poll_us);
  ASSERT_TRUE(g);
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      HttpClient c(g->port());
      for (int i = 0; i < 15; ++i) {
        std::vector<std::vector<int32_t>> seqs;
        std::string json = "[";
        for (int k = 0; k < 1 + (t + i) % 9; ++k) {
          auto& s = seqs.emplace_back();
          for (int j = 0; j < 1 + (t * 5 + i + k) % 11; ++j)
            s.push_back((t * 131 + i * 17 + k * 7 + j) % 997 + 1);
          json += k ? ",[" : "[";
          for (size_t j = 0; j < s.size(); ++j) {
            if (j) json += ',';  // not `(j ? "," : "") + ...`: g++ 12 warns falsely (-Wrestrict)
            json += std::to_string(s[j]);
          }
          json += "]";
        }
        auto r = c.Post("/v1/embeddings", "{\"input\":" + json + "]}");
        auto rows = Embeddings(r.body);
        bool ok = r.status == 200 && rows.size() == seqs.size();
        for (size_t k = 0; ok && k < seqs.size(); ++k) {
          ok = Cosine(rows[k], server::FakeEngine::Reference(seqs[k], a.engine_options)) >= 0.99999;
        }
        if (!ok) wrong++;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(GatewayFake, ConcurrentClientsGetTheirOwnRows) { ConcurrentClientsGetTheirOwnRows(-1); }
TEST_F(GatewayFake, ConcurrentClientsGetTheirOwnRowsWithReplyPoller) {
  ConcurrentClientsGetTheirOwnRows(200);
}

TEST_F(GatewayFake, LargeBodyIs413) {
  FakeServer a;
  auto g = StartGateway({a.address()}, {}, {}, 1024);
  ASSERT_TRUE(g);
  HttpClient c(g->port());
  auto r = c.Post("/v1/embeddings", "{\"input\":\"" + std::string(2000, 'a') + "\"}");
  EXPECT_EQ(r.status, 413u) << r.body;
  EXPECT_EQ(c.Post("/v1/embeddings", "{\"input\":[[1,2]]}").status, 200u);  // a new connection
}

TEST_F(GatewayFake, ExpectContinueIsAnsweredAtOnce) {
  FakeServer a;
  auto g = StartGateway({a.address()});
  ASSERT_TRUE(g);
  net::io_context io;
  net::ip::tcp::socket sock(io);
  sock.connect({net::ip::make_address("127.0.0.1"), g->port()});
  const std::string body = "{\"input\":[[1,2,3]]}";
  const std::string head =
      "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n";
  net::write(sock, net::buffer(head));
  // Without the interim answer a client like curl would wait a second here; the read below
  // would block forever, so it is bounded by polling with a deadline.
  std::string got(64, '\0');
  size_t n = 0;
  sock.non_blocking(true);
  const auto end = std::chrono::steady_clock::now() + 2s;
  while (got.substr(0, n).find("\r\n\r\n") == std::string::npos &&
         std::chrono::steady_clock::now() < end) {
    boost::system::error_code ec;
    n += sock.read_some(net::buffer(got.data() + n, got.size() - n), ec);
    if (ec && ec != net::error::would_block) break;
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(got.substr(0, 25), "HTTP/1.1 100 Continue\r\n\r\n");
  sock.non_blocking(false);
  net::write(sock, net::buffer(body));
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(sock, buf, res);
  EXPECT_EQ(res.result_int(), 200u) << res.body();
}

TEST_F(GatewayFake, ShutdownAnswersRequestsInFlight) {
  FakeServer a;
  a.engine->Hold();
  auto g = StartGateway({a.address()});
  ASSERT_TRUE(g);
  const uint16_t port = g->port();
  auto pending = std::async(std::launch::async, [port] {
    HttpClient c(port);
    return c.Post("/v1/embeddings", "{\"input\":[[5,6,7]]}").status;
  });
  ASSERT_TRUE(FakeServerHasQueued(a));
  auto stopping = std::async(std::launch::async, [&g] { g.reset(); });
  std::this_thread::sleep_for(200ms);
  HttpClient late(port);
  EXPECT_EQ(late.Get("/health").status, 0u);  // no longer accepting
  a.engine->Release();
  EXPECT_EQ(pending.get(), 200u);  // the request in flight was still answered
  stopping.get();
}

TEST_F(GatewayFake, MaxInputsBoundsScoreQueryIncluded) {
  // --max-inputs 0 used to make /v1/score unlimited (max_inputs - 1 wrapped around).
  GatewayOptions zero;
  zero.model_dir = MiniLmDir();
  zero.servers = {"127.0.0.1:1"};
  zero.max_inputs = 0;
  EXPECT_FALSE(Gateway::Start(zero).ok());
  FakeServer s;
  GatewayOptions go;
  go.servers = {s.address()};
  go.max_inputs = 3;
  auto g = StartTestGateway(go);
  ASSERT_TRUE(g);
  HttpClient c(g->port());
  // Query + 2 documents = 3 inputs: admitted (the fake engine's small vocabulary may refuse
  // MiniLM's ids afterwards, so only "not 413" is checked); query + 3 documents is 413.
  const auto ok = c.Post("/v1/score", "{\"query\":\"q\",\"documents\":[\"a\",\"b\"]}");
  EXPECT_NE(ok.status, 413u) << ok.body;
  EXPECT_EQ(c.Post("/v1/score", "{\"query\":\"q\",\"documents\":[\"a\",\"b\",\"c\"]}").status,
            413u);
}

TEST_F(GatewayFake, RouteTableAnswersEveryRouteAndItsMethod) {
  FakeServer s;
  auto g = StartGateway({s.address()}, {}, {"k"});
  ASSERT_TRUE(g);
  HttpClient c(g->port());
  for (const Route& r : Gateway::Routes()) {
    const std::string path(r.path);
    const bool post = r.method == boost::beast::http::verb::post;
    // Without a key: 401 exactly where the table says the route needs one.
    c.SetApiKey("");
    const auto anon = post ? c.Post(path, "{}") : c.Get(path);
    EXPECT_EQ(anon.status == 401u, r.needs_auth) << path << " " << anon.status;
    c.SetApiKey("k");
    const auto wrong = post ? c.Get(path) : c.Post(path, "{}");
    EXPECT_EQ(wrong.status, 405u) << path;
    const auto right = post ? c.Post(path, "{}") : c.Get(path);
    EXPECT_NE(right.status, 404u) << path;
    EXPECT_NE(right.status, 405u) << path;
    EXPECT_EQ(Gateway::FindRoute(path), &r);
  }
  c.SetApiKey("");
  EXPECT_EQ(c.Get("/nope").status, 401u);  // unknown paths reveal nothing without a key
  c.SetApiKey("k");
  EXPECT_EQ(c.Get("/nope").status, 404u);
  EXPECT_EQ(Gateway::FindRoute("/nope"), nullptr);
}

TEST_F(GatewayFake, NoServerMeansNotReady) {
  // Nothing listens on this port (it was free a moment ago).
  std::string address;
  {
    FakeServer s;
    address = s.address();
  }
  auto g = StartGateway({address});
  ASSERT_TRUE(g);
  HttpClient c(g->port());
  EXPECT_EQ(c.Get("/health").status, 200u);
  EXPECT_EQ(c.Get("/ready").status, 503u);
  EXPECT_EQ(c.Post("/v1/embeddings", "{\"input\":\"hello\"}").status, 503u);
}

}  // namespace
}  // namespace petal::gateway
