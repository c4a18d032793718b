// The engine-level benchmark behind `petal bench engine`: the design brief's scenarios run
// in-process (no server): sequential batch-1 latency, small-batch scoring latency, and
// 100-sequence throughput. The scenario list and latency summary are shared by the other
// benchmarks (grpc, http, rerank). Flags: src/cli/bench_flags.h. Thread-safety: single-threaded
// driver.
#pragma once

#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_factory.h"

namespace petal::bench {

struct LatencyStats {
  double p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0;
  int n = 0;
};

// Summarises samples in milliseconds.
LatencyStats Summarise(std::vector<double> ms);

struct BenchScenario {
  std::string name;  // e.g. "latency_1x128", "throughput_100x512"
  int seqs = 1;
  int len = 128;
  bool throughput = false;
  // Late chunking: pooling spans per sequence (equal chunks of len / spans tokens, mean-pooled);
  // the throughput line then also reports chunks/s. Named latechunk_BxLxC (a throughput run).
  int spans = 0;
};

// The standard scenario list; `only` (comma-separated names) filters it when non-empty. Names
// of the form latency_BxL / throughput_BxL outside the list add such scenarios (B sequences of
// L tokens per request), and latechunk_BxLxC throughput with C pooling spans per sequence.
std::vector<BenchScenario> StandardScenarios(const std::string& only);

// Runs `s` on `engine`: latency scenarios wait for each request before the next; throughput
// scenarios keep up to two requests in flight. Requests larger than `max_batch_tokens` are split
// into several Step() calls, as the server's scheduler would. Returns a JSON object.
StatusOr<std::string> RunScenario(Engine& engine, const BenchScenario& s, int max_batch_tokens,
                                  int max_batch_seqs, double seconds, int max_iters);

struct EngineBenchArgs {
  std::string model;  // a local folder (hub ids are resolved by the caller)
  std::string out;
  std::string scenarios;
  double seconds = 5.0;
  int max_iters = 2000;
  bool check = true;  // first compare the engine with the CPU fp32 reference (cosine >= 0.999)
  EngineOptions engine;
};

// `petal bench engine`: builds the engine, checks it (unless !check), runs the scenarios and writes
// the results JSON to `out` (and the kernel choices to `out`.kernels.txt). Returns the process
// exit code.
int RunBenchEngine(const EngineBenchArgs& a);

}  // namespace petal::bench
