// Test helper for the gateway tests of the newer outputs (classifier, SPLADE, reranker, ColBERT):
// a model folder served by two in-process CPU inference servers (fp32 engines, the goldens'
// precision: `auto` may pick bf16) behind a gateway whose chunks hold two inputs, so that a
// request spreads over both; and a JSON string quoter. Thread-safety: test-only; the servers and
// gateway run their own threads.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../layouts/layout_fixture.h"
#include "common/file_util.h"
#include "engine/engine_factory.h"
#include "gateway/gateway.h"
#include "server/server.h"

namespace petal::gateway::testing {

// The servers and the gateway; the destructor stops the gateway first, then the servers.
struct CpuStack {
  std::vector<server::EmbedServer*> servers;
  Gateway* gateway = nullptr;
  CpuStack() = default;
  CpuStack(const CpuStack&) = delete;
  CpuStack& operator=(const CpuStack&) = delete;
  virtual ~CpuStack() {
    delete gateway;
    for (auto* s : servers) {
      s->Shutdown(std::chrono::milliseconds(1000));
      delete s;
    }
  }
};

// Starts `st`'s two servers on `dir` and a gateway in front of them that serves it as `name` with
// at most `max_inputs` inputs per request; waits (up to 2 s) for a replica to be up. False, after
// an EXPECT failure naming the cause, when something does not start.
inline bool StartCpuStack(const std::string& dir, const std::string& name, size_t max_inputs,
                          CpuStack* st) {
  GatewayOptions go;
  for (int r = 0; r < 2; ++r) {
    EngineOptions eo;
    eo.backend = "cpu";
    eo.cpu.precision = "fp32";
    auto engine = CreateEngine(dir, eo);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    if (!engine.ok()) return false;
    server::ServerOptions so;
    so.listen = "127.0.0.1:0";
    auto srv = server::EmbedServer::Start(so);
    EXPECT_TRUE(srv.ok()) << srv.status().ToString();
    if (!srv.ok()) return false;
    st->servers.push_back(std::move(srv).value().release());
    st->servers.back()->AttachEngine(std::move(engine).value());
    go.servers.push_back("127.0.0.1:" + std::to_string(st->servers.back()->port()));
  }
  go.model_dir = dir;
  go.model_name = name;
  go.listen = "127.0.0.1:0";
  go.chunk = {2, 4096};  // two inputs per chunk: a request of several spreads over both replicas
  go.max_inputs = max_inputs;
  auto gw = Gateway::Start(go);
  EXPECT_TRUE(gw.ok()) << gw.status().ToString();
  if (!gw.ok()) return false;
  st->gateway = std::move(gw).value().release();
  for (int i = 0; i < 200 && !st->gateway->replicas().AnyUp(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// A gateway in front of the `bge` layout fixture (an embedding model) and no reachable server: for
// the refusals the gateway decides from the model's config. Null when the fixture has no tokenizer
// here (the caller skips) or after an EXPECT failure.
inline std::unique_ptr<Gateway> StartEmbedderWithoutServers(const std::string& temp_name) {
  uint64_t seed = 0;
  auto layouts = ::petal::testing::LoadLayouts(&seed);
  EXPECT_TRUE(layouts.ok()) << layouts.status().ToString();
  if (!layouts.ok()) return nullptr;
  ::petal::testing::LayoutSpec bge;
  for (const auto& l : *layouts) {
    if (l.name == "bge") bge = l;
  }
  const std::string dir = ::petal::testing::LayoutTempDir(temp_name);
  const Status built = ::petal::testing::BuildLayoutFolder(bge, seed, dir);
  EXPECT_TRUE(built.ok()) << built.ToString();
  if (!built.ok() || !FileExists(dir + "/tokenizer.json")) return nullptr;
  GatewayOptions go;
  go.model_dir = dir;
  go.model_name = "bge";
  go.servers = {"127.0.0.1:1"};
  go.listen = "127.0.0.1:0";
  auto g = Gateway::Start(go);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return nullptr;
  return std::move(g).value();
}

// `s` as a JSON string literal (quotes and backslashes escaped; the fixtures' texts need no more).
inline std::string Json(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

}  // namespace petal::gateway::testing
