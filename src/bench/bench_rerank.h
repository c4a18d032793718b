// `petal bench rerank`: the ranking benchmark of issue 17, in-process through the server's
// EngineLoop (the real scheduler, batching and pipelining; no network): one request is one query
// paired with `docs` documents, i.e. `docs` sequences of `len` tokens (random ids; for BERT-style
// models the first 16 tokens are type 0, the rest type 1). Per length: sequential requests
// (p50/p99 latency) and `clients` concurrent clients (pairs/s). It runs on any model, so the same
// numbers of a ranking model and the same-shape embedder compare directly.
// Flags: src/cli/bench_flags.h. Thread-safety: called from main() only.
#pragma once

#include <string>
#include <vector>

#include "engine/engine_factory.h"

namespace petal::bench {

struct RerankBenchArgs {
  std::string model;
  std::string out;
  int docs = 100;
  std::vector<int> lens = {256, 512};
  int clients = 4;
  double seconds = 5;
  int max_iters = 500;
  int max_inflight = 2;
  EngineOptions engine;
};

int RunBenchRerank(const RerankBenchArgs& a);

}  // namespace petal::bench
