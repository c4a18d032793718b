// The `Server-Timing` header (W3C Server Timing) of an embedding answer: the request's phases in
// the gateway, and the replica's own times, in milliseconds, e.g.
//   Server-Timing: parse;dur=0.011, tokenize;dur=0.060, replica;dur=1.912, server;dur=1.850,
//                  queue;dur=0.012, format;dur=0.021, gateway;dur=2.010
// `petal bench http` reads it to report where each request's time went (docs/api.md).
// Thread-safety: a value type, used by one thread at a time.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace petal::gateway {

class ServerTiming {
 public:
  // Appends `name;dur=<seconds in ms>`.
  void Add(std::string_view name, double seconds) {
    char buf[48];
    std::snprintf(buf, sizeof(buf), ";dur=%.3f", seconds * 1e3);
    if (!value_.empty()) value_ += ", ";
    value_.append(name);
    value_ += buf;
  }
  const std::string& value() const { return value_; }

 private:
  std::string value_;
};

}  // namespace petal::gateway
