// The client-side benchmarks, `petal bench grpc` (pre-tokenized scenarios against a running
// `petal server`) and `petal bench http` (texts through a running gateway): their arguments and
// runners, shared by the old names `petal client bench` and `petal bench-http` (flags:
// src/cli/bench_flags.h). Each runner prints a line per scenario and writes the results JSON
// (bench/report.py reads it); it returns the process exit code. Thread-safety: called from main()
// only.
#pragma once

#include <string>
#include <vector>

namespace petal::bench {

struct GrpcBenchArgs {
  std::string server = "127.0.0.1:50051";
  std::string scenarios;  // comma-separated subset of StandardScenarios (empty: all)
  std::string out;
  double seconds = 5;
  int max_iters = 2000;
  int clients = 4;         // concurrent clients in the throughput scenarios
  bool busy_poll = false;  // clients poll for replies instead of sleeping
};

int RunBenchGrpc(const GrpcBenchArgs& a);

struct HttpBenchArgs {
  std::string gateway = "127.0.0.1:8080";
  std::vector<int> concurrency = {1, 2, 4, 8, 16};
  int words = 510;
  double seconds = 5;
  double warmup_seconds = 1;
  int max_iters = 2000;
  std::string out;
};

int RunBenchHttp(const HttpBenchArgs& a);

}  // namespace petal::bench
