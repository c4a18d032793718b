// `petal bench rerank` (see bench_rerank.h).
#include "bench/bench_rerank.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include "bench/bench_engine.h"
#include "bench/bench_json.h"
#include "common/git_sha.h"
#include "engine/engine_factory.h"
#include "server/engine_loop.h"

namespace petal::bench {
namespace {

using Clock = std::chrono::steady_clock;

// One request: `docs` pairs of `len` tokens.
server::EmbedJob MakeJob(const ModelConfig& c, int docs, int len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> tok(0, c.vocab_size - 1);
  server::EmbedJob job;
  job.cu_seqlens.push_back(0);
  const bool typed = c.type_vocab_size >= 2;
  for (int d = 0; d < docs; ++d) {
    for (int t = 0; t < len; ++t) {
      job.token_ids.push_back(tok(rng));
      if (typed) job.token_type_ids.push_back(t < 16 ? 0 : 1);
    }
    job.cu_seqlens.push_back(static_cast<int32_t>(job.token_ids.size()));
  }
  job.format.dims = c.OutputDim();
  job.format.normalize = false;
  return job;
}

// Submits `job` and waits for its answer; returns the latency in ms, or a negative on error.
double RunOne(server::EngineLoop& loop, server::EmbedJob job) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  const auto t0 = Clock::now();
  auto h = loop.Submit(std::move(job), [&](const Status& s, server::EmbedResult*) {
    std::lock_guard<std::mutex> lock(mu);
    status = s;
    done = true;
    cv.notify_one();
  });
  if (!h.ok()) return -1;
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  if (!status.ok()) {
    std::fprintf(stderr, "error: %s\n", status.ToString().c_str());
    return -1;
  }
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

int RunBenchRerank(const RerankBenchArgs& a) {
  EngineOptions eo = a.engine;
  eo.cuda.ring_slots = std::max(eo.cuda.ring_slots, a.max_inflight + 2);
  auto engine_or = CreateEngine(a.model, eo);
  if (!engine_or.ok()) {
    std::fprintf(stderr, "error: %s\n", engine_or.status().ToString().c_str());
    return 1;
  }
  Engine& engine = **engine_or;
  const ModelConfig& c = engine.config();
  const bool cuda = engine.backend() == "cuda";
  server::EngineLoopOptions lo;
  lo.limits.max_batch_tokens = cuda ? eo.cuda.max_tokens : 16384;
  lo.limits.max_batch_seqs = cuda ? eo.cuda.max_seqs : 512;
  lo.max_inflight_batches = a.max_inflight;
  lo.idle_spin_us = cuda ? 2000 : 0;
  lo.max_queue_tokens = int64_t{1} << 30;
  server::ServerMetrics metrics;
  server::EngineLoop loop(&engine, lo, &metrics);
  std::printf("petal bench rerank: model %s (%s, task %s), backend %s, sha %s, %d docs/query\n",
              a.model.c_str(), c.hf_architecture.c_str(), ModelTaskName(c.task),
              engine.backend().c_str(), PETAL_GIT_SHA, a.docs);
  std::string json =
      "{\"tool\":\"petal bench rerank\",\"sha\":\"" + std::string(PETAL_GIT_SHA) +
      "\",\"model\":" + JsonLiteral(a.model) + ",\"task\":\"" + ModelTaskName(c.task) +
      "\",\"backend\":\"" + engine.backend() +
      "\",\"device\":" + JsonLiteral(cuda ? CudaDeviceName(eo.cuda.device) : std::string("cpu")) +
      ",\"docs\":" + std::to_string(a.docs) + ",\"clients\":" + std::to_string(a.clients) +
      ",\"max_batch_tokens\":" + std::to_string(lo.limits.max_batch_tokens) + ",\"runs\":{";
  bool first = true;
  for (int len : a.lens) {
    // Warm-up (graph captures, attention timing) on the shapes of this length.
    for (int i = 0; i < 3; ++i) {
      if (RunOne(loop, MakeJob(c, a.docs, len, 1000 + i)) < 0) return 1;
    }
    std::vector<double> ms;
    const auto end = Clock::now() + std::chrono::duration<double>(a.seconds);
    for (int i = 0; i < a.max_iters && (i < 5 || Clock::now() < end); ++i) {
      const double t = RunOne(loop, MakeJob(c, a.docs, len, static_cast<uint32_t>(i)));
      if (t < 0) return 1;
      ms.push_back(t);
    }
    const LatencyStats st = Summarise(ms);
    // Throughput: `clients` threads, each sending its next request when the last one answers.
    std::atomic<int64_t> pairs{0};
    std::atomic<bool> failed{false};
    const auto t0 = Clock::now();
    const auto tend = t0 + std::chrono::duration<double>(a.seconds);
    std::vector<std::thread> threads;
    for (int k = 0; k < a.clients; ++k) {
      threads.emplace_back([&, k] {
        for (uint32_t i = 0; Clock::now() < tend && !failed; ++i) {
          if (RunOne(loop, MakeJob(c, a.docs, len, 77 * k + i)) < 0) failed = true;
          pairs += a.docs;
        }
      });
    }
    for (auto& t : threads) t.join();
    if (failed) return 1;
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    const double pps = pairs.load() / wall;
    std::printf(
        "  %d x %d tokens: sequential p50 %8.3f  p99 %8.3f ms (n=%d); %d clients: %9.1f "
        "pairs/s\n",
        a.docs, len, st.p50, st.p99, st.n, a.clients, pps);
    std::fflush(stdout);
    char buf[96];
    std::snprintf(buf, sizeof buf, ",\"pairs_per_s\":%.2f}", pps);
    json += std::string(first ? "" : ",") + "\"" + std::to_string(a.docs) + "x" +
            std::to_string(len) + "\":{\"len\":" + std::to_string(len) + "," +
            LatencyJsonFields(st) + buf;
    first = false;
    WriteResultFile(a.out, json + "}}\n", /*quiet=*/true);
  }
  loop.Shutdown();
  json += "}}\n";
  return WriteResultFile(a.out, json);
}

}  // namespace petal::bench
