// Helpers for tests that put a gateway in front of in-process inference servers running the
// deterministic FakeEngine (each row is a known function of its token ids, so every answer can
// be checked against its own input): a replica that can be stopped and restarted on its port,
// a gateway with test-friendly intervals, distinct pre-tokenized inputs as JSON, and a load of
// clients that check every answer against their own input.
// Thread-safety: FakeReplica and the gateway are driven by the test thread; the FakeEngine's
// Hold/Release and the gateway's port may be used from any thread.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gateway/gateway.h"
#include "gateway_test_util.h"
#include "server/fake_engine.h"
#include "server/server.h"
#include "wire/client.h"

namespace petal::gateway::testing {

inline std::string MiniLmDir() { return SourceDir() + "/models/all-MiniLM-L6-v2"; }

struct FakeReplica {
  server::ServerOptions server_options;
  server::FakeEngineOptions engine_options;
  std::unique_ptr<server::EmbedServer> server;
  server::FakeEngine* engine = nullptr;  // owned by `server`
  int port = 0;

  explicit FakeReplica(server::ServerOptions so = {}, server::FakeEngineOptions fo = {})
      : server_options(std::move(so)), engine_options(fo) {
    Start();
  }
  ~FakeReplica() { Stop(); }
  // Starts (again) on the same port as before, or on a free one the first time.
  void Start() {
    server::ServerOptions so = server_options;
    so.listen = "127.0.0.1:" + std::to_string(port);
    auto s = server::EmbedServer::Start(so);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server = std::move(s).value();
    port = server->port();
    auto e = std::make_unique<server::FakeEngine>(engine_options);
    engine = e.get();
    server->AttachEngine(std::move(e));
  }
  // A graceful stop with a short grace: calls still queued after it are cancelled.
  void Stop() {
    if (!server) return;
    engine->Release();
    server->Shutdown(std::chrono::milliseconds(1000));
    server.reset();
    engine = nullptr;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  StatusOr<v1::StatsResponse> Stats() const { return wire::EmbedClient(address()).Stats(); }
  // Waits (up to 5 s) until `pred(stats)` holds.
  template <typename Pred>
  bool WaitForStats(Pred pred) const {
    wire::EmbedClient client(address());
    for (int i = 0; i < 500; ++i) {
      auto st = client.Stats();
      if (st.ok() && pred(*st)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
};

inline std::unique_ptr<Gateway> StartTestGateway(GatewayOptions go) {
  if (go.model_dir.empty()) go.model_dir = MiniLmDir();
  go.listen = "127.0.0.1:0";
  go.health_interval = std::chrono::milliseconds(100);
  auto g = Gateway::Start(go);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? std::move(g).value() : nullptr;
}

// `n` distinct sequences (ids in [1, 997], lengths 1..7) keyed by `salt`, as vectors and JSON.
inline std::string DistinctSequences(int n, int salt, std::vector<std::vector<int32_t>>* seqs) {
  std::string json = "[";
  for (int i = 0; i < n; ++i) {
    auto& s = seqs->emplace_back();
    for (int j = 0; j < 1 + (i + salt) % 7; ++j)
      s.push_back((salt * 131 + i * 31 + j * 7) % 997 + 1);
    json += i ? ",[" : "[";
    for (size_t j = 0; j < s.size(); ++j) {
      if (j) json += ',';  // not `(j ? "," : "") + ...`: g++ 12 warns falsely (-Wrestrict)
      json += std::to_string(s[j]);
    }
    json += "]";
  }
  return json + "]";
}

// True iff `body` is an OpenAI answer whose rows are exactly FakeEngine's rows for `seqs`.
inline bool RowsAreOwn(const std::string& body, const std::vector<std::vector<int32_t>>& seqs,
                       const server::FakeEngineOptions& fo) {
  auto rows = Embeddings(body);
  if (rows.size() != seqs.size()) return false;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (Cosine(rows[i], server::FakeEngine::Reference(seqs[i], fo)) < 0.99999) return false;
  }
  return true;
}

// `clients` threads each post `per_client` distinct multi-sequence requests, once each; returns
// how many came back 200 with exactly their own rows (every other answer is an ADD_FAILURE).
inline int PostDistinctRequests(uint16_t port, int clients, int per_client,
                                const server::FakeEngineOptions& fo) {
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      HttpClient c(port);
      for (int i = 0; i < per_client; ++i) {
        std::vector<std::vector<int32_t>> seqs;
        const std::string input = DistinctSequences(5 + (i * 7 + t) % 30, t * 100 + i, &seqs);
        auto r = c.Post("/v1/embeddings", "{\"input\":" + input + "}");
        if (r.status == 200 && RowsAreOwn(r.body, seqs, fo)) {
          ok++;
        } else {
          ADD_FAILURE() << r.status << " " << r.body.substr(0, 200);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  return ok.load();
}

// Runs `clients` threads, each posting its own distinct request in a loop until `stop`; counts
// answers that are 200 with exactly the client's own rows, and everything else.
struct Load {
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> threads;
  Load(uint16_t port, int clients, const server::FakeEngineOptions& fo) {
    for (int t = 0; t < clients; ++t) {
      threads.emplace_back([this, port, t, fo] {
        HttpClient c(port);
        for (int i = 0; !stop; ++i) {
          std::vector<std::vector<int32_t>> seqs;
          const std::string input = DistinctSequences(6 + (t + i) % 10, t * 1000 + i, &seqs);
          auto r = c.Post("/v1/embeddings", "{\"input\":" + input + "}");
          const bool good = r.status == 200 && RowsAreOwn(r.body, seqs, fo);
          (good ? ok : bad)++;
          if (!good)
            ADD_FAILURE() << "client " << t << ": " << r.status << " " << r.body.substr(0, 200);
        }
      });
    }
  }
  void Join() {
    stop = true;
    for (auto& t : threads) t.join();
  }
};

}  // namespace petal::gateway::testing
