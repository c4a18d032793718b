// Test helper for the gateway tests of the newer outputs (classifier, SPLADE, reranker, ColBERT):
// a model folder served by two in-process CPU inference servers (fp32 engines, the goldens'
// precision: `auto` may pick bf16) behind a gateway whose chunks hold two inputs, so that a
// request spreads over both; and a JSON string quoter. Thread-safety: test-only; the servers and
// gateway run their own threads.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

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
