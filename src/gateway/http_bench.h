// The HTTP benchmark behind `petal bench http`: the design brief's high-concurrency scenario
// through the gateway (tokenization and the gateway-to-server hop included): texts of about N
// tokens, one per request, C concurrent clients each sending strictly sequential requests on a
// kept-alive connection. Thread-safety: RunHttpBench is called from one thread; it starts its
// own client threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace petal::gateway {

struct HttpBenchSpec {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  int concurrency = 1;
  int words = 510;  // words per text; common English words are one token each in BERT and Qwen
  double seconds = 5;
  int max_iters = 2000;  // most requests per client
  int warmup = 5;        // requests per client before timing starts
  // ... and for at least this long, all clients at once: first-use costs (GEMM tuning, graph
  // capture, attention choice for each new batch shape the concurrency produces) then fall
  // before the timed window, which measures the steady state.
  double warmup_seconds = 1.0;
};

struct HttpBenchResult {
  std::vector<double> latency_ms;  // every timed request
  double wall_s = 0;
  int errors = 0;
  std::string first_error;
  int prompt_tokens = 0;  // `usage.prompt_tokens` of one answer: the tokens the model saw
  // The answers' Server-Timing phases (gateway/server_timing.h), ms, one sample per timed request
  // that carried the phase, by name in order of first appearance.
  std::vector<std::pair<std::string, std::vector<double>>> phases_ms;
};

// Adds the `name;dur=MS` entries of a Server-Timing header value to `phases`.
void AddServerTiming(std::string_view header,
                     std::vector<std::pair<std::string, std::vector<double>>>* phases);

// A text of `words` words, varied by `seed` so that requests differ.
std::string BenchText(int words, uint64_t seed);

StatusOr<HttpBenchResult> RunHttpBench(const HttpBenchSpec& spec);

}  // namespace petal::gateway
