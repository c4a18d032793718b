// Test helper for the classifier / SPLADE gateway tests (gateway_classify_test,
// gateway_sparse_test): a fixture of tests/fixtures/classify/ served by two in-process CPU
// inference servers (fp32) behind a gateway with two-input chunks, so that a batch spreads over
// both; and a JSON string quoter. Thread-safety: test-only; the servers and gateway run their own
// threads.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../layouts/classify_fixture.h"
#include "common/file_util.h"
#include "engine/engine_factory.h"
#include "gateway/gateway.h"
#include "server/server.h"

namespace petal::gateway::testing {

struct ClassifyStack {
  std::vector<server::EmbedServer*> servers;
  Gateway* gateway = nullptr;
  ::petal::testing::ClassifyGolden golden;
  ~ClassifyStack() {
    delete gateway;
    for (auto* s : servers) {
      s->Shutdown(std::chrono::milliseconds(1000));
      delete s;
    }
  }
};

// `remap`, if given, turns the built folder into the one served (e.g. a Router folder around it).
inline std::unique_ptr<ClassifyStack> StartClassifyStack(
    const std::string& name,
    const std::function<StatusOr<std::string>(const std::string&)>& remap = nullptr) {
  auto st = std::make_unique<ClassifyStack>();
  auto m = ::petal::testing::LoadClassifyManifest();
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return nullptr;
  ::petal::testing::ClassifyFixture fx;
  for (const auto& f : m->fixtures) {
    if (f.spec.name == name) fx = f;
  }
  auto g = ::petal::testing::LoadClassifyGolden(name);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return nullptr;
  st->golden = *g;
  auto dir = ::petal::testing::BuildClassifyFolder(*m, fx, *g);
  EXPECT_TRUE(dir.ok()) << dir.status().ToString();
  if (!dir.ok() || !FileExists(*dir + "/tokenizer.json")) return nullptr;
  if (remap) {
    dir = remap(*dir);
    EXPECT_TRUE(dir.ok()) << dir.status().ToString();
    if (!dir.ok()) return nullptr;
  }
  GatewayOptions go;
  for (int r = 0; r < 2; ++r) {
    EngineOptions eo;
    eo.backend = "cpu";
    eo.cpu.precision = "fp32";  // the fp32 reference: auto may pick bf16
    auto engine = CreateEngine(*dir, eo);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    if (!engine.ok()) return nullptr;
    server::ServerOptions so;
    so.listen = "127.0.0.1:0";
    auto srv = server::EmbedServer::Start(so);
    EXPECT_TRUE(srv.ok());
    if (!srv.ok()) return nullptr;
    st->servers.push_back(std::move(srv).value().release());
    st->servers.back()->AttachEngine(std::move(engine).value());
    go.servers.push_back("127.0.0.1:" + std::to_string(st->servers.back()->port()));
  }
  go.model_dir = *dir;
  go.model_name = name;
  go.listen = "127.0.0.1:0";
  go.chunk = {2, 4096};  // two inputs per chunk: a batch of nine spreads over both replicas
  go.max_inputs = 9;
  auto gw = Gateway::Start(go);
  EXPECT_TRUE(gw.ok()) << gw.status().ToString();
  if (!gw.ok()) return nullptr;
  st->gateway = std::move(gw).value().release();
  for (int i = 0; i < 200 && !st->gateway->replicas().AnyUp(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return st;
}

inline std::string Json(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

}  // namespace petal::gateway::testing
