// Helpers shared by the server end-to-end tests: an in-process server on a loopback port with a
// FakeEngine, and random pre-tokenized inputs. Thread-safety: a TestServer is driven by the test
// thread; its client may be used from any thread.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "server/fake_engine.h"
#include "server/server.h"
#include "wire/client.h"

namespace petal::server::testing {

struct TestServer {
  FakeEngineOptions engine_options;
  FakeEngine* engine = nullptr;  // owned by the server
  std::unique_ptr<EmbedServer> server;
  std::unique_ptr<wire::EmbedClient> client;
  std::string address;  // what clients dial: 127.0.0.1:PORT or the unix: socket

  explicit TestServer(ServerOptions so = {}, FakeEngineOptions fo = {}, bool attach = true)
      : engine_options(fo) {
    if (!so.listen.starts_with("unix:")) so.listen = "127.0.0.1:0";  // else: that Unix socket
    auto s = EmbedServer::Start(so);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    server = std::move(s).value();
    address =
        so.listen.starts_with("unix:") ? so.listen : "127.0.0.1:" + std::to_string(server->port());
    client = std::make_unique<wire::EmbedClient>(address);
    if (attach) Attach();
  }
  void Attach() {
    auto e = std::make_unique<FakeEngine>(engine_options);
    engine = e.get();
    server->AttachEngine(std::move(e));
  }
  ~TestServer() {
    if (engine) engine->Release();
    server->Shutdown(std::chrono::milliseconds(2000));
  }
  // Polls Stats until `pred` holds (or ~5 s pass).
  template <typename Pred>
  bool WaitForStats(Pred pred) {
    for (int i = 0; i < 500; ++i) {
      auto st = client->Stats();
      if (st.ok() && pred(*st)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
};

inline std::vector<std::vector<int32_t>> RandomSeqs(std::mt19937& rng, int n, int max_len,
                                                    int vocab) {
  std::vector<std::vector<int32_t>> seqs(n);
  for (auto& s : seqs) {
    s.resize(std::uniform_int_distribution<int>(1, max_len)(rng));
    for (auto& t : s) t = std::uniform_int_distribution<int>(0, vocab - 1)(rng);
  }
  return seqs;
}

inline v1::EmbedOptions Options(v1::DType dtype, uint32_t dims = 0) {
  v1::EmbedOptions o;
  o.set_dtype(dtype);
  o.set_dimensions(dims);
  return o;
}

}  // namespace petal::server::testing
