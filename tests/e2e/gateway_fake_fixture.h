// Test helper shared by gateway_fake_test.cc and gateway_flow_test.cc (one executable): a gateway
// in front of in-process FakeEngine servers (fake_cluster.h), distinct token sequences, and the
// GatewayFake fixture, which skips when models/all-MiniLM-L6-v2 (the gateway's tokenizer and
// config) is absent. Thread-safety: test-only.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "fake_cluster.h"
#include "gateway/gateway.h"
#include "server/fake_engine.h"
#include "server/server.h"

namespace petal::gateway::testing {

using namespace std::chrono_literals;

// The shared FakeReplica (fake_cluster.h), under the name these tests grew up with.
using FakeServer = FakeReplica;

inline std::unique_ptr<Gateway> StartGateway(std::vector<std::string> servers,
                                             ChunkLimits chunk = {},
                                             std::vector<std::string> api_keys = {},
                                             size_t body_limit = 32u << 20,
                                             int reply_poll_us = -1) {
  GatewayOptions go;
  go.reply_poll_us = reply_poll_us;
  go.servers = std::move(servers);
  go.chunk = chunk;
  go.request_timeout = 10000ms;
  go.api_keys = std::move(api_keys);
  go.body_limit = body_limit;
  return StartTestGateway(go);
}

// `n` distinct token sequences of varying length, as JSON and as vectors.
inline std::string Sequences(int n, std::vector<std::vector<int32_t>>* seqs) {
  return DistinctSequences(n, /*salt=*/0, seqs);  // fake_cluster.h
}

// Waits (up to 5 s) until the server has admitted a request it has not answered.
inline bool FakeServerHasQueued(const FakeServer& s) {
  return s.WaitForStats([](const v1::StatsResponse& st) { return st.queue_requests() > 0; });
}

class GatewayFake : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!FileExists(MiniLmDir() + "/tokenizer.json")) GTEST_SKIP() << MiniLmDir() << " is missing";
  }
};

}  // namespace petal::gateway::testing
