// End-to-end tests of the gRPC server on loopback with the FakeEngine: routing of results under
// concurrency, wire dtypes, backpressure, validation errors, cancellation, deadlines, health and
// graceful shutdown.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <future>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "server_test_util.h"
#include "wire/codec.h"

namespace petal::server::testing {
namespace {

using namespace std::chrono_literals;

std::vector<float> Expected(const std::vector<int32_t>& ids, const FakeEngineOptions& fo,
                            int dims) {
  auto e = FakeEngine::Reference(ids, fo);
  e.resize(dims);
  if (fo.normalize) wire::L2Normalize(e.data(), dims);
  return e;
}

// gRPC's own health service says SERVING for "" as soon as a server listens, before ours can say
// it is loading: a bare one (that instant) must not count as serving to our clients.
TEST(ServerE2E, BareGrpcHealthIsNotServing) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  v1::Embedder::CallbackService unimplemented;  // gRPC needs one service to start
  builder.RegisterService(&unimplemented);
  auto bare = builder.BuildAndStart();
  ASSERT_TRUE(bare && port != 0);
  wire::EmbedClient client("127.0.0.1:" + std::to_string(port));
  auto serving = client.Serving();
  EXPECT_FALSE(serving.ok() && *serving);
  bare->Shutdown();
}

TEST(ServerE2E, HealthAndModelInfoFollowModelLoading) {
  TestServer ts({}, {}, /*attach=*/false);
  auto serving = ts.client->Serving();
  ASSERT_TRUE(serving.ok()) << serving.status().ToString();
  EXPECT_FALSE(*serving);
  auto early = ts.client->Embed(wire::MakeEmbedRequest({{1, 2}}));
  EXPECT_EQ(early.status().code(), StatusCode::kUnavailable);
  auto st = ts.client->Stats();
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->requests(), 1u);
  EXPECT_EQ(st->requests_failed(), 1u);
  ts.Attach();
  EXPECT_TRUE(ts.client->WaitUntilServing(5s));
  auto per_service = ts.client->Serving("petal.v1.Embedder");
  ASSERT_TRUE(per_service.ok()) << per_service.status().ToString();
  EXPECT_TRUE(*per_service);
  auto info = ts.client->ModelInfo();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->protocol_version(), 1u);
  EXPECT_EQ(info->hidden_size(), 32u);
  EXPECT_EQ(info->vocab_size(), 1000u);
  EXPECT_EQ(info->max_tokens(), 512u);
  EXPECT_EQ(info->backend(), "fake");
  EXPECT_TRUE(info->normalize());
  EXPECT_EQ(info->dtypes_size(), 6);
}

TEST(ServerE2E, BusyPortIsAnError) {
  TestServer ts;
  ServerOptions so;
  so.listen = "127.0.0.1:" + std::to_string(ts.server->port());
  auto second = EmbedServer::Start(so);
  EXPECT_FALSE(second.ok());
}

// 12 clients, each its own channel, 15 requests each: every answer is its own request's rows.
void ConcurrentClientsGetTheirOwnRows(ServerOptions so) {
  so.loop.limits = {96, 7};  // small, so requests spread over several batches
  TestServer ts(so);
  const FakeEngineOptions fo = ts.engine_options;
  constexpr int kThreads = 12, kPerThread = 15;
  std::atomic<int> sequences{0};
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      wire::EmbedClient client(ts.address);  // own channel
      for (int i = 0; i < kPerThread; ++i) {
        auto seqs =
            RandomSeqs(rng, std::uniform_int_distribution<int>(1, 12)(rng), 60, fo.vocab_size);
        const uint32_t dims = (i % 3 == 0) ? 16 : 0;
        auto resp = client.Embed(wire::MakeEmbedRequest(
            seqs, Options(v1::DTYPE_FLOAT32, dims), std::to_string(t) + "/" + std::to_string(i)));
        if (!resp.ok()) {
          ADD_FAILURE() << resp.status().ToString();
          ++failures;
          continue;
        }
        EXPECT_EQ(resp->request_id(), std::to_string(t) + "/" + std::to_string(i));
        auto rows = wire::DecodeEmbeddings(*resp);
        ASSERT_TRUE(rows.ok());
        ASSERT_EQ(rows->size(), seqs.size());
        const int d = dims ? dims : fo.hidden_size;
        for (size_t r = 0; r < seqs.size(); ++r) {
          auto want = Expected(seqs[r], fo, d);
          ASSERT_EQ((*rows)[r].size(), static_cast<size_t>(d));
          for (int k = 0; k < d; ++k) ASSERT_NEAR((*rows)[r][k], want[k], 1e-6f) << "row " << r;
        }
        sequences += seqs.size();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto stats = ts.client->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->requests_ok(), static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_EQ(stats->sequences(),
            static_cast<uint64_t>(sequences.load()));  // none lost or duplicated
  EXPECT_EQ(stats->queue_requests(), 0u);
  ASSERT_EQ(stats->engine().count("batches"), 1u);  // the engine's own counters pass through
  EXPECT_GT(stats->engine().at("batches"), 0.0);
  int engine_seqs = 0;
  for (const auto& b : ts.engine->batches()) {
    EXPECT_LE(b.num_seqs, 7);
    if (b.num_seqs > 1) {
      EXPECT_LE(b.num_tokens, 96);
    }
    engine_seqs += b.num_seqs;
  }
  EXPECT_EQ(engine_seqs, sequences.load());
}

TEST(ServerE2E, ConcurrentClientsGetExactlyTheirOwnEmbeddings) {
  ConcurrentClientsGetTheirOwnRows(ServerOptions{});
}

// The same over a Unix domain socket, with the polling thread on (grpc_poller.h).
TEST(ServerE2E, UnixSocketAndGrpcPollerServeConcurrentClients) {
  ServerOptions so;
  so.listen =
      "unix:" + ::testing::TempDir() + "/server_e2e_" + std::to_string(::getpid()) + ".sock";
  so.grpc_poll_us = 500;
  ConcurrentClientsGetTheirOwnRows(so);
}

TEST(ServerE2E, AsyncCallbacksDeliverEachRequestsRows) {
  TestServer ts;
  std::mt19937 rng(77);
  constexpr int kCalls = 20;
  std::vector<std::vector<std::vector<int32_t>>> inputs;
  std::vector<std::promise<StatusOr<v1::EmbedResponse>>> promises(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    inputs.push_back(RandomSeqs(rng, 1 + i % 4, 30, ts.engine_options.vocab_size));
    ts.client->EmbedAsync(
        std::make_shared<const v1::EmbedRequest>(wire::MakeEmbedRequest(inputs.back())), 10000ms,
        [&promises, i](StatusOr<v1::EmbedResponse> r) { promises[i].set_value(std::move(r)); });
  }
  for (int i = 0; i < kCalls; ++i) {
    auto f = promises[i].get_future();
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto rows = wire::DecodeEmbeddings(*r);
    ASSERT_TRUE(rows.ok());
    ASSERT_EQ(rows->size(), inputs[i].size());
    for (size_t k = 0; k < inputs[i].size(); ++k) {
      auto want = Expected(inputs[i][k], ts.engine_options, 32);
      for (int d = 0; d < 32; ++d) ASSERT_NEAR((*rows)[k][d], want[d], 1e-6f);
    }
  }
}

TEST(ServerE2E, WireDtypesDecodeToTheReference) {
  TestServer ts;
  const auto fo = ts.engine_options;
  std::mt19937 rng(5);
  auto seqs = RandomSeqs(rng, 6, 40, fo.vocab_size);
  for (auto dt : {v1::DTYPE_FLOAT16, v1::DTYPE_INT8, v1::DTYPE_BINARY, v1::DTYPE_UBINARY,
                  v1::DTYPE_INT8_TANH}) {
    auto resp = ts.client->Embed(wire::MakeEmbedRequest(seqs, Options(dt, 24)));
    ASSERT_TRUE(resp.ok()) << resp.status().ToString();
    EXPECT_EQ(resp->dtype(), dt);
    EXPECT_EQ(resp->shape(0), 6u);
    EXPECT_EQ(resp->shape(1), (dt == v1::DTYPE_BINARY || dt == v1::DTYPE_UBINARY) ? 3u : 24u);
    auto rows = wire::DecodeEmbeddings(*resp);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    for (size_t r = 0; r < seqs.size(); ++r) {
      auto want = Expected(seqs[r], fo, 24);
      for (int k = 0; k < 24; ++k) {
        if (dt == v1::DTYPE_BINARY || dt == v1::DTYPE_UBINARY) {
          EXPECT_EQ((*rows)[r][k], want[k] >= 0 ? 1.f : -1.f);
        } else {
          const float tol = dt == v1::DTYPE_FLOAT16     ? 1e-3f
                            : dt == v1::DTYPE_INT8_TANH ? 0.01f
                                                        : resp->scales(r) * 0.5f + 1e-6f;
          EXPECT_NEAR((*rows)[r][k], want[k], tol);
        }
      }
    }
  }
}

TEST(ServerE2E, NormalizeOverrideOnAModelThatDoesNotNormalize) {
  FakeEngineOptions fo;
  fo.normalize = false;
  TestServer ts({}, fo);
  const std::vector<int32_t> ids = {5, 6, 7, 8};
  auto raw = FakeEngine::Reference(ids, fo);
  for (auto mode : {v1::NORMALIZE_DEFAULT, v1::NORMALIZE_FALSE, v1::NORMALIZE_TRUE}) {
    v1::EmbedOptions o = Options(v1::DTYPE_FLOAT32, 16);
    o.set_normalize(mode);
    auto resp = ts.client->Embed(wire::MakeEmbedRequest({ids}, o));
    ASSERT_TRUE(resp.ok()) << resp.status().ToString();
    auto rows = wire::DecodeEmbeddings(*resp);
    std::vector<float> want(raw.begin(), raw.begin() + 16);
    if (mode == v1::NORMALIZE_TRUE) wire::L2Normalize(want.data(), 16);
    for (int k = 0; k < 16; ++k) EXPECT_NEAR((*rows)[0][k], want[k], 1e-6f) << "mode " << mode;
  }
}

TEST(ServerE2E, InvalidArgumentsNameTheField) {
  TestServer ts;
  struct Case {
    const char* name;
    std::function<void(v1::EmbedRequest*)> mutate;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"no sequences",
       [](v1::EmbedRequest* r) {
         r->clear_lengths();
         r->clear_token_ids();
       },
       "lengths:"},
      {"empty sequence", [](v1::EmbedRequest* r) { r->add_lengths(0); },
       "lengths[2]: sequence is empty"},
      {"lengths do not sum", [](v1::EmbedRequest* r) { r->set_lengths(0, 2); }, "lengths: sum"},
      {"ragged bytes", [](v1::EmbedRequest* r) { r->mutable_token_ids()->push_back('x'); },
       "token_ids:"},
      {"id >= vocab",
       [](v1::EmbedRequest* r) {
         *r = wire::MakeEmbedRequest({{1, 2}, {3, 1000}});
       },
       "token_ids[3] (sequence 1, position 1)"},
      {"negative id", [](v1::EmbedRequest* r) { *r = wire::MakeEmbedRequest({{-1}}); },
       "token_ids[0]"},
      {"too long",
       [](v1::EmbedRequest* r) { *r = wire::MakeEmbedRequest({std::vector<int32_t>(513, 1)}); },
       "lengths[0]: 513 tokens exceeds"},
      {"bad dimensions", [](v1::EmbedRequest* r) { r->mutable_options()->set_dimensions(33); },
       "options.dimensions"},
      {"unknown dtype",
       [](v1::EmbedRequest* r) { r->mutable_options()->set_dtype(static_cast<v1::DType>(42)); },
       "options.dtype"},
      {"normalize off on a normalising model",
       [](v1::EmbedRequest* r) { r->mutable_options()->set_normalize(v1::NORMALIZE_FALSE); },
       "options.normalize"},
      {"future protocol", [](v1::EmbedRequest* r) { r->set_protocol_version(9); },
       "protocol_version"},
  };
  for (const auto& c : cases) {
    auto req = wire::MakeEmbedRequest({{1, 2, 3}, {4, 5}});
    c.mutate(&req);
    auto resp = ts.client->Embed(req);
    ASSERT_FALSE(resp.ok()) << c.name;
    EXPECT_EQ(resp.status().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(resp.status().message().find(c.field), std::string::npos)
        << c.name << ": " << resp.status().message();
  }
  auto stats = ts.client->Stats();
  EXPECT_EQ(stats->requests_invalid(), cases.size());
  EXPECT_EQ(stats->batches(), 0u);  // nothing reached the engine
}

TEST(ServerE2E, FullQueueRejectsAtOnceAndAcceptedWorkCompletes) {
  ServerOptions so;
  so.loop.max_queue_requests = 4;
  so.loop.max_queue_tokens = 1000;
  TestServer ts(so);
  ts.engine->Hold();  // the "GPU" stalls, so admitted work stays queued
  std::mt19937 rng(9);
  std::vector<std::vector<std::vector<int32_t>>> inputs;
  std::vector<std::unique_ptr<wire::PendingCall>> calls;
  for (int i = 0; i < 4; ++i) {
    inputs.push_back(RandomSeqs(rng, 3, 20, 1000));
    calls.push_back(ts.client->StartEmbed(wire::MakeEmbedRequest(inputs.back())));
  }
  ASSERT_TRUE(ts.WaitForStats([](const v1::StatsResponse& s) { return s.queue_requests() == 4; }));
  const auto t0 = std::chrono::steady_clock::now();
  auto rejected = ts.client->Embed(wire::MakeEmbedRequest({{1, 2, 3}}));
  EXPECT_EQ(rejected.status().code(), StatusCode::kResourceExhausted)
      << rejected.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);  // at once, not after the queue drains
  ts.engine->Release();
  for (size_t i = 0; i < calls.size(); ++i) {
    auto resp = calls[i]->Wait();
    ASSERT_TRUE(resp.ok()) << resp.status().ToString();
    auto rows = wire::DecodeEmbeddings(*resp);
    for (size_t r = 0; r < inputs[i].size(); ++r) {
      auto want = Expected(inputs[i][r], ts.engine_options, 32);
      for (int k = 0; k < 32; ++k) ASSERT_NEAR((*rows)[r][k], want[k], 1e-6f);
    }
  }
  auto stats = ts.client->Stats();
  EXPECT_EQ(stats->requests_rejected(), 1u);
  EXPECT_EQ(stats->requests_ok(), 4u);
  EXPECT_EQ(stats->requests(), 5u);
  EXPECT_TRUE(ts.client->Embed(wire::MakeEmbedRequest({{1, 2, 3}})).ok());  // capacity is back
}

// Holds the engine on a first request, queues `victim` behind it, and returns once both are
// admitted; the victim's token ids are 700..709 so the test can tell whether they ran.
struct Blocked {
  std::unique_ptr<wire::PendingCall> first;
  std::unique_ptr<wire::PendingCall> victim;
};
Blocked BlockEngineAndQueueVictim(TestServer& ts, std::chrono::milliseconds victim_timeout) {
  ts.engine->Hold();
  Blocked b;
  b.first = ts.client->StartEmbed(wire::MakeEmbedRequest({{1, 2, 3}}));
  EXPECT_TRUE(
      ts.WaitForStats([](const v1::StatsResponse& s) { return s.inflight_batches() == 1; }));
  std::vector<std::vector<int32_t>> victim;
  for (int i = 0; i < 10; ++i) victim.push_back({700 + i, 5, 6});
  b.victim = ts.client->StartEmbed(wire::MakeEmbedRequest(victim), victim_timeout);
  EXPECT_TRUE(
      ts.WaitForStats([](const v1::StatsResponse& s) { return s.pending_sequences() == 10; }));
  return b;
}

void ExpectVictimNeverRan(TestServer& ts) {
  // A later request passes through the scheduler, which must have dropped the victim's sequences.
  EXPECT_TRUE(ts.client->Embed(wire::MakeEmbedRequest({{9, 9}})).ok());
  for (const auto& batch : ts.engine->batches()) {
    for (int t : batch.first_tokens) EXPECT_FALSE(t >= 700 && t < 710) << "dropped sequence ran";
  }
  auto stats = ts.client->Stats();
  EXPECT_EQ(stats->sequences_dropped(), 10u);
  EXPECT_EQ(stats->queue_requests(), 0u);
}

TEST(ServerE2E, CancelledRequestIsDroppedBeforeItRuns) {
  ServerOptions so;
  so.loop.max_inflight_batches = 1;
  TestServer ts(so);
  Blocked b = BlockEngineAndQueueVictim(ts, 0ms);
  b.victim->Cancel();
  EXPECT_EQ(b.victim->Wait().status().code(), StatusCode::kCancelled);
  ASSERT_TRUE(
      ts.WaitForStats([](const v1::StatsResponse& s) { return s.requests_cancelled() == 1; }));
  ts.engine->Release();
  EXPECT_TRUE(b.first->Wait().ok());
  ExpectVictimNeverRan(ts);
}

TEST(ServerE2E, ExpiredDeadlineDropsWorkBeforeItRuns) {
  ServerOptions so;
  so.loop.max_inflight_batches = 1;
  TestServer ts(so);
  Blocked b = BlockEngineAndQueueVictim(ts, 1000ms);
  EXPECT_EQ(b.victim->Wait().status().code(), StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(ts.WaitForStats([](const v1::StatsResponse& s) {
    return s.requests_cancelled() + s.requests_expired() == 1;
  }));
  ts.engine->Release();
  EXPECT_TRUE(b.first->Wait().ok());
  ExpectVictimNeverRan(ts);
}

TEST(ServerE2E, ShutdownFinishesInFlightWorkThenRefuses) {
  auto ts = std::make_unique<TestServer>();
  ts->engine->Hold();
  std::vector<std::unique_ptr<wire::PendingCall>> calls;
  for (int i = 0; i < 5; ++i)
    calls.push_back(ts->client->StartEmbed(wire::MakeEmbedRequest({{i + 1, 2}})));
  ASSERT_TRUE(ts->WaitForStats([](const v1::StatsResponse& s) { return s.queue_requests() == 5; }));
  auto stopper = std::async(std::launch::async, [&] { ts->server->Shutdown(10s); });
  std::this_thread::sleep_for(100ms);
  ts->engine->Release();
  stopper.get();
  for (auto& c : calls) EXPECT_TRUE(c->Wait().ok());
  EXPECT_FALSE(ts->client->Embed(wire::MakeEmbedRequest({{1}}), 2000ms).ok());
}

}  // namespace
}  // namespace petal::server::testing
