// Fault injection on the local path (`petal serve --replica-transport local`): the same
// guarantees as fault_injection_test.cc, with the replicas in the gateway's process
// (server::LocalReplica over the FakeEngine) instead of gRPC servers. A replica shut down and
// replaced under load, an engine that fails and is rebuilt (alone, and beside a healthy replica),
// a slow replica, a replica slower than the deadline, and a replica at its queue limit: no
// accepted request is lost or answered with another request's rows (every row is compared with
// FakeEngine::Reference of its own input). See docs/reliability.md.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "common/file_util.h"
#include "fake_cluster.h"
#include "server/local_replica.h"

namespace petal::gateway {
namespace {

using namespace testing;
using namespace std::chrono_literals;

// Forwards to a FakeEngine the test keeps (shared), so the engine's records outlive the replica,
// which destroys its engines on Stop and after a fault.
class SharedFake final : public Engine {
 public:
  explicit SharedFake(std::shared_ptr<server::FakeEngine> e) : e_(std::move(e)) {}
  const ModelConfig& config() const override { return e_->config(); }
  std::string backend() const override { return e_->backend(); }
  StatusOr<std::unique_ptr<PendingEmbeddings>> Step(const Batch& batch) override {
    return e_->Step(batch);
  }

 private:
  std::shared_ptr<server::FakeEngine> e_;
};

// A LocalReplica over a FakeEngine, registered as "local:<name>"; each engine it builds (the
// first and those after a fault) is recorded so a test can reach the current one.
struct LocalFake {
  std::string name;
  server::EngineLoopOptions loop;
  server::FakeEngineOptions fo;
  std::shared_ptr<server::LocalReplica> replica;
  std::mutex mu;
  std::vector<std::shared_ptr<server::FakeEngine>> engines;  // every one built; the last is current
  std::atomic<int> built{0};

  LocalFake(std::string n, server::FakeEngineOptions f = {}, server::EngineLoopOptions l = {})
      : name(std::move(n)), loop(l), fo(f) {
    Start();
  }
  ~LocalFake() { Stop(); }
  std::unique_ptr<Engine> Build() {
    auto e = std::make_shared<server::FakeEngine>(fo);
    std::lock_guard<std::mutex> lock(mu);
    engines.push_back(e);
    built++;
    return std::make_unique<SharedFake>(e);
  }
  void Start() {
    replica = server::LocalReplica::Create(
        Build(), loop, [this]() -> StatusOr<std::unique_ptr<Engine>> { return Build(); });
    wire::RegisterLocalReplica(name, replica);
  }
  void Stop() {
    if (!replica) return;
    wire::UnregisterLocalReplica(name);
    Current()->Release();
    replica->Shutdown();
    replica.reset();
  }
  server::FakeEngine* Current() {
    std::lock_guard<std::mutex> lock(mu);
    return engines.back().get();
  }
  uint64_t SequencesRun() {
    std::lock_guard<std::mutex> lock(mu);
    uint64_t n = 0;
    for (const auto& e : engines)
      for (const auto& b : e->batches()) n += b.num_seqs;
    return n;
  }
  std::string address() const { return "local:" + name; }
};

class FaultInjectionLocal : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!FileExists(MiniLmDir() + "/tokenizer.json")) GTEST_SKIP() << MiniLmDir() << " missing";
  }
};

TEST_F(FaultInjectionLocal, ReplicaShutDownAndReplacedUnderLoad) {
  LocalFake a("fi-a"), b("fi-b");
  GatewayOptions go;
  go.servers = {a.address(), b.address()};
  go.chunk = {4, 100000};
  auto g = StartTestGateway(go);
  ASSERT_TRUE(g);
  Load load(g->port(), 4, a.fo);
  std::this_thread::sleep_for(300ms);
  a.Stop();  // admitted chunks finish; later calls get UNAVAILABLE and are retried on b
  std::this_thread::sleep_for(500ms);
  const int ok_while_down = load.ok;
  const uint64_t before = a.SequencesRun();
  a.Start();  // registered again under the same name: the health checker takes it back
  bool used_again = false;
  for (int i = 0; i < 100 && !used_again; ++i) {
    std::this_thread::sleep_for(50ms);
    used_again = a.SequencesRun() > before;
  }
  load.Join();
  EXPECT_EQ(load.bad.load(), 0);
  EXPECT_GT(load.ok.load(), ok_while_down);
  EXPECT_TRUE(used_again) << "the replaced replica got no work";
}

// An engine fault beside a healthy replica: the failed chunks are retried there, the faulty
// replica rebuilds its engine and gets work again; no client sees an error.
TEST_F(FaultInjectionLocal, EngineFaultIsRebuiltAndLosesNothing) {
  LocalFake a("fi-fault-a"), b("fi-fault-b");
  GatewayOptions go;
  go.servers = {a.address(), b.address()};
  go.chunk = {4, 100000};
  auto g = StartTestGateway(go);
  ASSERT_TRUE(g);
  Load load(g->port(), 4, a.fo);
  std::this_thread::sleep_for(200ms);
  a.Current()->FailNextSteps(3);
  bool rebuilt = false;
  for (int i = 0; i < 100 && !rebuilt; ++i) {
    std::this_thread::sleep_for(50ms);
    rebuilt = a.replica->restarts() >= 1;
  }
  ASSERT_TRUE(rebuilt) << "the faulty engine was not rebuilt";
  const uint64_t before = a.SequencesRun();
  bool used_again = false;
  for (int i = 0; i < 100 && !used_again; ++i) {
    std::this_thread::sleep_for(50ms);
    used_again = a.SequencesRun() > before;
  }
  load.Join();
  EXPECT_EQ(load.bad.load(), 0);
  EXPECT_GT(load.ok.load(), 0);
  EXPECT_TRUE(used_again) << "the rebuilt replica got no work";
  EXPECT_EQ(a.built.load(), 2);
  EXPECT_EQ(g->replicas().held_tokens(), 0);
}

// The only replica faults (the SIGUSR1 drill's path): while its engine is rebuilt no replica is
// up, so requests get 503 (never 500, never another request's rows); then the new engine serves.
TEST_F(FaultInjectionLocal, OnlyReplicaFaultDrillRecovers) {
  LocalFake a("fi-drill");
  GatewayOptions go;
  go.servers = {a.address()};
  go.chunk = {4, 100000};
  auto g = StartTestGateway(go);
  ASSERT_TRUE(g);
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, unavailable{0}, bad{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 3; ++t) {
    clients.emplace_back([&, t] {
      HttpClient c(g->port());
      for (int i = 0; !stop; ++i) {
        std::vector<std::vector<int32_t>> seqs;
        const std::string input = DistinctSequences(6 + (t + i) % 10, t * 1000 + i, &seqs);
        auto r = c.Post("/v1/embeddings", "{\"input\":" + input + "}");
        if (r.status == 200 && RowsAreOwn(r.body, seqs, a.fo)) {
          ok++;
        } else if (r.status == 503) {
          unavailable++;
        } else {
          bad++;
          ADD_FAILURE() << r.status << " " << r.body.substr(0, 200);
        }
      }
    });
  }
  std::this_thread::sleep_for(200ms);
  a.replica->InjectFault();
  for (int i = 0; i < 100 && a.replica->restarts() == 0; ++i) std::this_thread::sleep_for(50ms);
  std::this_thread::sleep_for(300ms);  // the health checker (100 ms here) takes it back
  const int ok_after_restart = ok;
  std::this_thread::sleep_for(300ms);
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(a.replica->restarts(), 1);
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(ok.load(), ok_after_restart) << "nothing was answered after the rebuild";
}

TEST_F(FaultInjectionLocal, SlowReplicaGetsLessWorkAndEveryAnswerIsRight) {
  LocalFake fast("fi-fast");
  server::FakeEngineOptions slow_engine;
  slow_engine.per_batch = 50ms;
  LocalFake slow("fi-slow", slow_engine);
  GatewayOptions go;
  go.servers = {fast.address(), slow.address()};
  go.chunk = {2, 100000};
  auto g = StartTestGateway(go);
  ASSERT_TRUE(g);
  Load load(g->port(), 4, fast.fo);
  std::this_thread::sleep_for(1500ms);
  load.Join();
  EXPECT_EQ(load.bad.load(), 0);
  EXPECT_GT(load.ok.load(), 8);
  EXPECT_GT(fast.SequencesRun(), 2 * slow.SequencesRun());
}

TEST_F(FaultInjectionLocal, ReplicaSlowerThanTheTimeoutIs504AndTheGatewayRecovers) {
  server::FakeEngineOptions very_slow;
  very_slow.per_batch = 1500ms;
  LocalFake r("fi-very-slow", very_slow);
  GatewayOptions go;
  go.servers = {r.address()};
  go.request_timeout = 300ms;
  auto g = StartTestGateway(go);
  ASSERT_TRUE(g);
  HttpClient c(g->port());
  auto res = c.Post("/v1/embeddings", "{\"input\":[[1,2,3]]}");
  EXPECT_EQ(res.status, 504u) << res.body;
  EXPECT_NE(res.body.find("\"error\""), std::string::npos);
  EXPECT_EQ(c.Get("/ready").status, 200u);
  EXPECT_EQ(r.replica->restarts(), 0) << "a deadline is not an engine fault";
}

TEST_F(FaultInjectionLocal, ReplicaAtItsQueueLimitLosesNothingAndRefusesNoClient) {
  server::EngineLoopOptions lo;
  lo.max_queue_requests = 2;
  lo.max_queue_tokens = 64;
  server::FakeEngineOptions fo;
  fo.per_batch = 2ms;
  LocalFake a("fi-queue", fo, lo);
  GatewayOptions go;
  go.servers = {a.address()};
  go.chunk.max_seqs = 4;
  go.chunk.max_tokens = 32;
  auto g = StartTestGateway(go);
  ASSERT_TRUE(g);
  EXPECT_EQ(PostDistinctRequests(g->port(), 6, 8, fo), 48);  // 6 clients x 8 requests
  auto st = a.replica->Stats();
  ASSERT_TRUE(st.ok());
  EXPECT_GT(st->requests_rejected(), 0u) << "the replica's bound was never reached";
  EXPECT_EQ(st->queue_requests(), 0u);
  EXPECT_EQ(g->replicas().held_tokens(), 0);
}

}  // namespace
}  // namespace petal::gateway
