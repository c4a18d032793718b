// Client-side load generator for a running Petal server (behind `petal bench grpc`): the
// design brief's pre-tokenized scenarios over gRPC. Each client is a thread with its own channel
// (its own TCP connection) sending requests back to back, so `clients` = 4 reproduces "4
// concurrent client processes". Thread-safety: RunGrpcBench is self-contained.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace petal::server {

struct GrpcBenchSpec {
  int seqs = 1;            // sequences per request
  int len = 128;           // tokens per sequence
  int clients = 1;         // concurrent clients, each strictly sequential
  double seconds = 5;      // time budget (after warm-up)
  int max_iters = 2000;    // most requests per client
  int warmup = 3;          // untimed requests per client first
  int vocab = 1000;        // token ids are drawn from [0, vocab)
  bool busy_poll = false;  // clients poll for replies (EmbedBusyPoll) instead of sleeping
};

struct GrpcBenchResult {
  std::vector<double> latency_ms;  // client-observed, every timed request
  std::vector<double> server_ms;   // the server's own total_us for the same requests
  int64_t embeddings = 0;
  double wall_s = 0;
};

StatusOr<GrpcBenchResult> RunGrpcBench(const std::string& address, const GrpcBenchSpec& spec);

}  // namespace petal::server
