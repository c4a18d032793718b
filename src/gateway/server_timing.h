// The `Server-Timing` header (W3C Server Timing) of an embedding answer: the request's phases in
// the gateway, and the replica's own times, in milliseconds, e.g.
//   Server-Timing: parse;dur=0.011, tokenize;dur=0.060, replica;dur=1.912, server;dur=1.850,
//                  queue;dur=0.012, format;dur=0.021, gateway;dur=2.010
// `petal bench http` reads it to report where each request's time went (docs/api.md).
// Thread-safety: a value type, used by one thread at a time.
#pragma once

#include <boost/beast/core/string.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "gateway/chunker.h"

namespace petal::gateway {

class ServerTiming {
 public:
  // Appends `name;dur=<seconds in ms>`. The value lives in the object (no allocation) up to
  // kInline characters, which the embed route's seven phases fit; past that it moves to a string.
  void Add(std::string_view name, double seconds) {
    char entry[80];
    const int n = std::snprintf(entry, sizeof(entry), "%s%.*s;dur=%.3f", len_ ? ", " : "",
                                static_cast<int>(std::min<size_t>(name.size(), 48)), name.data(),
                                seconds * 1e3);
    const size_t add = std::min<size_t>(static_cast<size_t>(std::max(n, 0)), sizeof(entry) - 1);
    if (spill_.empty() && len_ + add <= kInline) {
      std::copy_n(entry, add, inline_ + len_);
    } else {
      if (spill_.empty()) spill_.assign(inline_, len_);
      spill_.append(entry, add);
    }
    len_ += add;
  }
  std::string_view value() const {
    return spill_.empty() ? std::string_view(inline_, len_) : std::string_view(spill_);
  }

 private:
  static constexpr size_t kInline = 200;
  char inline_[kInline];
  size_t len_ = 0;
  std::string spill_;  // the whole value once it outgrows inline_
};

// For Beast's header setters, which take their own string_view type.
inline boost::beast::string_view ToBeast(std::string_view v) { return {v.data(), v.size()}; }

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
