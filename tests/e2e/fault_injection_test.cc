// Fault injection through the whole stack (HTTP gateway -> gRPC -> server -> FakeEngine): a
// replica killed and restarted under load, a slow replica, clients that disconnect mid-request
// (HTTP and gRPC), requests over every limit, and a server at its queue limit. Each test checks
// what the client sees (status codes) and that no accepted request is lost or answered with
// another request's rows: every row is compared with FakeEngine::Reference of its own input.
// See docs/reliability.md for the guarantees these tests stand for.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "common/file_util.h"
#include "fake_cluster.h"

namespace petal::gateway {
namespace {

using namespace testing;
using namespace std::chrono_literals;

class FaultInjection : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!FileExists(MiniLmDir() + "/tokenizer.json")) GTEST_SKIP() << MiniLmDir() << " missing";
  }
};

uint64_t SequencesRun(const FakeReplica& r) {
  uint64_t n = 0;
  for (const auto& b : r.engine->batches()) n += b.num_seqs;
  return n;
}

TEST_F(FaultInjection, ReplicaKilledAndRestartedUnderLoad) {
  FakeReplica a, b;
  GatewayOptions go;
  go.servers = {a.address(), b.address()};
  go.chunk = {4, 100000};
  auto g = StartTestGateway(go);
  ASSERT_TRUE(g);
  Load load(g->port(), 4, a.engine_options);
  std::this_thread::sleep_for(300ms);
  a.Stop();  // in-flight chunks are finished or cancelled; cancelled ones are retried on b
  std::this_thread::sleep_for(500ms);
  const int ok_while_down = load.ok;
  a.Start();  // same port: the gateway's health checker brings it back
  bool used_again = false;
  for (int i = 0; i < 100 && !used_again; ++i) {
    std::this_thread::sleep_for(50ms);
    used_again = SequencesRun(a) > 0;
  }
  std::this_thread::sleep_for(300ms);
  load.Join();
  EXPECT_EQ(load.bad.load(), 0);
  EXPECT_GT(load.ok.load(), ok_while_down);
  EXPECT_TRUE(used_again) << "the restarted replica got no work";
}

TEST_F(FaultInjection, SlowReplicaGetsLessWorkAndEveryAnswerIsRight) {
  FakeReplica fast;
  server::FakeEngineOptions slow_engine;
  slow_engine.per_batch = 50ms;  // every batch on this replica takes 50 ms
  FakeReplica slow({}, slow_engine);
  GatewayOptions go;
  go.servers = {fast.address(), slow.address()};
  go.chunk = {2, 100000};
  auto g = StartTestGateway(go);
  ASSERT_TRUE(g);
  Load load(g->port(), 4, fast.engine_options);
  std::this_thread::sleep_for(1500ms);
  load.Join();
  EXPECT_EQ(load.bad.load(), 0);
  EXPECT_GT(load.ok.load(), 8);
  // Least outstanding tokens: the slow replica keeps its chunks longer, so it gets fewer.
  EXPECT_GT(SequencesRun(fast), 2 * SequencesRun(slow));
}

TEST_F(FaultInjection, ReplicaSlowerThanTheTimeoutIs504AndTheGatewayRecovers) {
  server::FakeEngineOptions very_slow;
  very_slow.per_batch = 1500ms;
  FakeReplica r({}, very_slow);
  GatewayOptions go;
  go.servers = {r.address()};
  go.request_timeout = 300ms;
  auto g = StartTestGateway(go);
  ASSERT_TRUE(g);
  HttpClient c(g->port());
  auto res = c.Post("/v1/embeddings", "{\"input\":[[1,2,3]]}");
  EXPECT_EQ(res.status, 504u) << res.body;
  EXPECT_NE(res.body.find("\"error\""), std::string::npos);
  // The server counts the call as expired (dropped if it had not run) once it notices.
  EXPECT_TRUE(r.WaitForStats([](const v1::StatsResponse& s) {
    return s.requests_expired() + s.requests_cancelled() + s.requests_ok() == 1 &&
           s.queue_requests() == 0;
  }));
  EXPECT_EQ(c.Get("/ready").status, 200u);  // a slow replica is not a dead one
}

// Sends the head and `body_part` of a POST on a raw socket, then closes it.
void PostAndHangUp(uint16_t port, const std::string& body, size_t body_part) {
  net::io_context io;
  net::ip::tcp::socket sock(io);
  sock.connect({net::ip::make_address("127.0.0.1"), port});
  const std::string head =
      "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n";
  net::write(sock, net::buffer(head + body.substr(0, body_part)));
  sock.close();
}

TEST_F(FaultInjection, HttpClientsThatHangUpDoNotDisturbOthers) {
  FakeReplica a;
  GatewayOptions go;
  go.servers = {a.address()};
  auto g = StartTestGateway(go);
  ASSERT_TRUE(g);
  // 1. A complete request whose client leaves while the engine holds it.
  a.engine->Hold();
  PostAndHangUp(g->port(), "{\"input\":[[5,6,7]]}", 100);
  ASSERT_TRUE(a.WaitForStats([](const v1::StatsResponse& s) { return s.queue_requests() == 1; }));
  a.engine->Release();
  ASSERT_TRUE(a.WaitForStats([](const v1::StatsResponse& s) { return s.queue_requests() == 0; }));
  // 2. Clients that leave mid-body, over and over, next to well-behaved ones.
  Load load(g->port(), 3, a.engine_options);
  std::vector<std::vector<int32_t>> seqs;
  const std::string body = "{\"input\":" + DistinctSequences(20, 7, &seqs) + "}";
  for (int i = 0; i < 200; ++i) PostAndHangUp(g->port(), body, (i * 37) % body.size());
  load.Join();
  EXPECT_EQ(load.bad.load(), 0);
  EXPECT_GT(load.ok.load(), 0);
  HttpClient c(g->port());
  auto r = c.Post("/v1/embeddings", body);
  EXPECT_EQ(r.status, 200u);
  EXPECT_TRUE(RowsAreOwn(r.body, seqs, a.engine_options));
}

TEST_F(FaultInjection, GrpcClientThatGoesAwayIsCancelledOthersGetTheirRows) {
  server::ServerOptions so;
  so.loop.max_inflight_batches = 1;  // later requests wait in the pool while the engine is held
  FakeReplica a(so);
  a.engine->Hold();
  wire::EmbedClient keeper(a.address());
  auto first = keeper.StartEmbed(wire::MakeEmbedRequest({{1, 2, 3}}));
  ASSERT_TRUE(a.WaitForStats([](const v1::StatsResponse& s) { return s.inflight_batches() >= 1; }));
  {
    // A client with its own channel that disappears (channel and call destroyed) mid-request.
    wire::EmbedClient leaver(a.address());
    auto call = leaver.StartEmbed(wire::MakeEmbedRequest({{700, 701}, {702}}));
    ASSERT_TRUE(a.WaitForStats([](const v1::StatsResponse& s) { return s.queue_requests() == 2; }));
  }
  const std::vector<std::vector<int32_t>> mine = {{11, 12, 13}, {14}, {15, 16}};
  auto second = keeper.StartEmbed(wire::MakeEmbedRequest(mine));
  ASSERT_TRUE(
      a.WaitForStats([](const v1::StatsResponse& s) { return s.requests_cancelled() == 1; }));
  a.engine->Release();
  ASSERT_TRUE(first->Wait().ok());
  auto resp = second->Wait();
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  auto rows = wire::DecodeEmbeddings(*resp);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), mine.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    EXPECT_GE(Cosine((*rows)[i], server::FakeEngine::Reference(mine[i], a.engine_options)),
              0.99999);
  }
  for (const auto& b : a.engine->batches()) {
    for (int t : b.first_tokens) EXPECT_FALSE(t >= 700 && t <= 702) << "cancelled work ran";
  }
}

TEST_F(FaultInjection, RequestOverEveryLimitGetsTheFirstLimitsAnswer) {
  server::ServerOptions so;
  so.max_message_bytes = 64 << 10;
  so.loop.max_queue_tokens = 4096;
  FakeReplica a(so);
  GatewayOptions go;
  go.servers = {a.address()};
  go.body_limit = 8192;
  go.max_inputs = 8;
  auto g = StartTestGateway(go);
  ASSERT_TRUE(g);
  HttpClient c(g->port());
  const std::string long_text = JsonString(std::string(3000, 'a') + " b");
  auto over = [&](int inputs) {
    std::string arr = "[";
    for (int i = 0; i < inputs; ++i) arr += (i ? "," : "") + long_text;
    return "{\"input\":" + arr + "],\"dimensions\":100000,\"encoding_format\":\"hex\"}";
  };
  // Body over the byte limit (and every other limit): 413 before anything is parsed.
  EXPECT_EQ(c.Post("/v1/embeddings", over(9)).status, 413u);
  // Under the byte limit, but too many inputs, each too long, bad options: the first check.
  auto r = c.Post("/v1/embeddings",
                  "{\"input\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"],"
                  "\"dimensions\":100000,\"encoding_format\":\"hex\"}");
  EXPECT_GE(r.status, 400u);
  EXPECT_LT(r.status, 500u);
  EXPECT_NE(r.body.find("\"error\""), std::string::npos);
  EXPECT_EQ(c.Post("/v1/embeddings", over(2)).status / 100, 4u);
  // gRPC: over the message size, over the queue, too long, ids outside the vocabulary.
  wire::EmbedClient client(a.address());
  std::vector<std::vector<int32_t>> huge(40, std::vector<int32_t>(600, 5000));
  auto big = client.Embed(wire::MakeEmbedRequest(huge));
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted) << big.status().ToString();
  std::vector<std::vector<int32_t>> bad(9, std::vector<int32_t>(513, 5000));
  auto invalid = client.Embed(wire::MakeEmbedRequest(bad));
  EXPECT_EQ(invalid.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(invalid.status().message().rfind("lengths[0]", 0), 0u) << invalid.status().message();
  // Nothing reached the engine, and the stack still serves.
  EXPECT_TRUE(a.engine->batches().empty());
  std::vector<std::vector<int32_t>> seqs;
  r = c.Post("/v1/embeddings", "{\"input\":" + DistinctSequences(3, 1, &seqs) + "}");
  EXPECT_EQ(r.status, 200u);
  EXPECT_TRUE(RowsAreOwn(r.body, seqs, a.engine_options));
}

// Flow control: many clients with multi-chunk requests against a server with a tiny queue bound
// all get their own rows; the server refused chunks (its bound was reached), the gateway held
// and resent them, and no client saw an error.
TEST_F(FaultInjection, ServerAtItsQueueLimitLosesNothingAndRefusesNoClient) {
  server::ServerOptions so;
  so.loop.max_queue_requests = 2;
  so.loop.max_queue_tokens = 64;
  server::FakeEngineOptions fo;
  fo.per_batch = 2ms;
  FakeReplica a(so, fo);
  GatewayOptions go;
  go.servers = {a.address()};
  go.chunk.max_seqs = 4;
  go.chunk.max_tokens = 32;
  auto g = StartTestGateway(go);
  ASSERT_TRUE(g);
  EXPECT_EQ(PostDistinctRequests(g->port(), 6, 8, fo), 48);  // 6 clients x 8 requests
  auto st = a.Stats();
  ASSERT_TRUE(st.ok());
  EXPECT_GT(st->requests_rejected(), 0u) << "the server's bound was never reached";
  EXPECT_EQ(st->queue_requests(), 0u);
  EXPECT_EQ(g->replicas().held_tokens(), 0);
}

}  // namespace
}  // namespace petal::gateway
