// End-to-end tests of the gateway's flow control against in-process FakeEngine servers: a
// server at its queue bound makes the gateway hold chunks; past the gateway's own bound, or past a
// request's deadline while queued, requests get 429 with Retry-After. Part of gateway_fake_test
// (gateway_fake_fixture.h); skips without models/all-MiniLM-L6-v2.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "gateway_fake_fixture.h"

namespace petal::gateway {
namespace {

using namespace testing;
using namespace std::chrono_literals;

// Flow control: a server at its queue bound makes the gateway hold the chunk, not bounce it.
TEST_F(GatewayFake, FullServerQueueIsHeldByTheGateway) {
  server::ServerOptions so;
  so.loop.max_queue_requests = 1;
  FakeServer a(so);
  a.engine->Hold();  // the first request stays queued
  auto g = StartGateway({a.address()});
  ASSERT_TRUE(g);
  auto post = [&](std::string body) {
    return std::async(std::launch::async, [&, body] {
      HttpClient c(g->port());
      return c.Post("/v1/embeddings", body);
    });
  };
  auto first = post("{\"input\":[[5,6,7]]}");
  ASSERT_TRUE(FakeServerHasQueued(a));
  auto second = post("{\"input\":[[8,9]]}");
  EXPECT_EQ(second.wait_for(300ms), std::future_status::timeout) << "answered while held";
  a.engine->Release();
  EXPECT_EQ(first.get().status, 200u);
  auto r = second.get();
  EXPECT_EQ(r.status, 200u) << r.body;
  EXPECT_TRUE(RowsAreOwn(r.body, {{8, 9}}, a.engine_options));
  EXPECT_EQ(g->replicas().held_tokens(), 0);
}

// Past the gateway's own bound: 429 with Retry-After; a request larger than the bound: 400.
TEST_F(GatewayFake, PastTheGatewayBoundIs429WithRetryAfter) {
  FakeServer a;
  a.engine->Hold();
  GatewayOptions go;
  go.servers = {a.address()};
  go.flow.max_held_tokens = 10;
  auto g = StartTestGateway(go);
  ASSERT_TRUE(g);
  auto first = std::async(std::launch::async, [&] {
    HttpClient c(g->port());
    return c.Post("/v1/embeddings", "{\"input\":[[5,6,7]]}").status;
  });
  ASSERT_TRUE(FakeServerHasQueued(a));
  HttpClient c(g->port());
  auto r = c.Post("/v1/embeddings", "{\"input\":[[1,2,3,4],[1,2,3,4]]}");  // 3 + 8 > 10
  EXPECT_EQ(r.status, 429u) << r.body;
  EXPECT_EQ(r.retry_after, "1");
  EXPECT_NE(r.body.find("gateway: queue is full"), std::string::npos) << r.body;
  r = c.Post("/v1/embeddings", "{\"input\":[[1,2,3,4,5,6],[1,2,3,4,5]]}");  // 11 > 10
  EXPECT_EQ(r.status, 400u) << r.body;
  auto fits = std::async(std::launch::async, [&] {  // 3 + 7 = 10: accepted, waits for the engine
    HttpClient c2(g->port());
    return c2.Post("/v1/embeddings", "{\"input\":[[1,2,3,4,5,6,7]]}").status;
  });
  EXPECT_EQ(fits.wait_for(200ms), std::future_status::timeout);
  a.engine->Release();
  EXPECT_EQ(first.get(), 200u);
  EXPECT_EQ(fits.get(), 200u);
}

// A chunk still queued in the gateway when its request's deadline passes: 429 with Retry-After.
TEST_F(GatewayFake, DeadlinePassedWhileQueuedIs429) {
  FakeServer a;
  a.engine->Hold();
  GatewayOptions go;
  go.servers = {a.address()};
  go.flow.replica_window_calls = 1;  // the second request waits in the gateway
  go.request_timeout = 400ms;
  auto g = StartTestGateway(go);
  ASSERT_TRUE(g);
  auto first = std::async(std::launch::async, [&] {
    HttpClient c(g->port());
    return c.Post("/v1/embeddings", "{\"input\":[[5,6,7]]}").status;
  });
  ASSERT_TRUE(FakeServerHasQueued(a));
  HttpClient c(g->port());
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.Post("/v1/embeddings", "{\"input\":[[8,9]]}");
  EXPECT_EQ(r.status, 429u) << r.body;
  EXPECT_EQ(r.retry_after, "1");
  EXPECT_NE(r.body.find("deadline"), std::string::npos) << r.body;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  EXPECT_EQ(first.get(), 504u);  // its deadline passed on the server
  a.engine->Release();
  EXPECT_EQ(c.Post("/v1/embeddings", "{\"input\":[[8,9]]}").status, 200u);
}

}  // namespace
}  // namespace petal::gateway
