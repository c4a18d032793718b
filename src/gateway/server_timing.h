// The `Server-Timing` header (W3C Server Timing) of an embedding answer: the request's phases in
// the gateway, and the replica's own times, in milliseconds, e.g.
//   Server-Timing: parse;dur=0.011, tokenize;dur=0.060, replica;dur=1.912, server;dur=1.850,
//                  queue;dur=0.012, format;dur=0.021, gateway;dur=2.010
// `petal bench http` reads it to report where each request's time went (docs/api.md).
// Thread-safety: a value type, used by one thread at a time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "gateway/chunker.h"

namespace petal::gateway {

class ServerTiming {
 public:
  // Appends `name;dur=<seconds in ms>`.
  void Add(std::string_view name, double seconds) {
    char buf[48];
    std::snprintf(buf, sizeof(buf), ";dur=%.3f", seconds * 1e3);
    if (value_.empty()) {
      value_.reserve(kTypical);
    } else {
      value_ += ", ";
    }
    value_.append(name);
    value_ += buf;
  }
  const std::string& value() const { return value_; }

 private:
  static constexpr size_t kTypical = 160;  // the embed route's seven phases, one allocation
  std::string value_;
};

// Adds the replica phases of a chunked answer: "replica" (the round trip, `replica_s`), then the
// slowest chunk's "server" and "queue" times as its server reported them.
inline void AddReplicaTimes(ServerTiming* t, double replica_s, const ChunkedResult& r) {
  t->Add("replica", replica_s);
  uint64_t queue_us = 0, server_us = 0;
  for (const auto& resp : r.responses) {
    queue_us = std::max<uint64_t>(queue_us, resp.queue_us());
    server_us = std::max<uint64_t>(server_us, resp.total_us());
  }
  t->Add("server", static_cast<double>(server_us) * 1e-6);
  t->Add("queue", static_cast<double>(queue_us) * 1e-6);
}

}  // namespace petal::gateway
