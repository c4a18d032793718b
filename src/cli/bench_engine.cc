#include "cli/bench_engine.h"

#include "cli/bench_json.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <random>
#include <sstream>

namespace petal::cli {

LatencyStats Summarise(std::vector<double> ms) {
  LatencyStats s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(p / 100.0 * (ms.size() - 1) + 0.5))];
  };
  s.p50 = pct(50);
  s.p90 = pct(90);
  s.p99 = pct(99);
  s.max = ms.back();
  double sum = 0;
  for (double v : ms) sum += v;
  s.mean = sum / ms.size();
  s.n = static_cast<int>(ms.size());
  return s;
}

std::vector<BenchScenario> StandardScenarios(const std::string& only) {
  std::vector<BenchScenario> all = {
      {"latency_1x128", 1, 128, false},         {"latency_1x512", 1, 512, false},
      {"latency_1x4096", 1, 4096, false},       {"latency_5x512", 5, 512, false},
      {"latency_25x512", 25, 512, false},       {"latency_50x512", 50, 512, false},
      {"throughput_100x512", 100, 512, true},   {"throughput_100x1024", 100, 1024, true},
      {"throughput_100x4096", 100, 4096, true},
  };
  if (only.empty()) return all;
  std::vector<BenchScenario> out;
  std::stringstream names(only);
  std::string name;
  while (std::getline(names, name, ',')) {
    auto it = std::find_if(all.begin(), all.end(), [&](const auto& s) { return s.name == name; });
    if (it != all.end()) {
      out.push_back(*it);
      continue;
    }
    // Other shapes in the same naming, e.g. throughput_32x128 for a small CPU run.
    BenchScenario s;
    char kind[16] = {0};
    char tail = 0;
    if (std::sscanf(name.c_str(), "latechunk_%dx%dx%d%c", &s.seqs, &s.len, &s.spans, &tail) == 3 &&
        s.seqs > 0 && s.len > 0 && s.spans > 0 && s.spans <= s.len) {
      s.name = name;
      s.throughput = true;
      out.push_back(s);
      continue;
    }
    s.spans = 0;
    if (std::sscanf(name.c_str(), "%15[a-z]_%dx%d%c", kind, &s.seqs, &s.len, &tail) == 3 &&
        s.seqs > 0 && s.len > 0 &&
        (std::string(kind) == "latency" || std::string(kind) == "throughput")) {
      s.name = name;
      s.throughput = std::string(kind) == "throughput";
      out.push_back(s);
    } else {
      std::fprintf(stderr, "warning: unknown scenario '%s' ignored\n", name.c_str());
    }
  }
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

// One request: its sequences split into engine batches under the capacity limits.
// With `spans` > 0, each sequence carries that many equal pooling spans (mean, raw).
std::vector<Batch> MakeRequest(std::mt19937& rng, int vocab, int seqs, int len, int max_tokens,
                               int max_seqs, int spans = 0) {
  std::uniform_int_distribution<int> tok(0, vocab - 1);
  std::vector<Batch> batches;
  Batch cur;
  cur.cu_seqlens.push_back(0);
  std::vector<int32_t> ids(len);
  for (int s = 0; s < seqs; ++s) {
    if (cur.num_seqs() > 0 && (cur.num_tokens() + len > max_tokens || cur.num_seqs() >= max_seqs)) {
      batches.push_back(std::move(cur));
      cur = Batch();
      cur.cu_seqlens.push_back(0);
    }
    for (auto& t : ids) t = tok(rng);
    const int base = cur.num_tokens();
    cur.Add(ids);
    for (int k = 0; k < spans; ++k)
      cur.AddSpan(base + len * k / spans, base + len * (k + 1) / spans, 0, false);
  }
  batches.push_back(std::move(cur));
  return batches;
}

// The engine holds a few result slots (CudaEngineOptions::ring_slots, default 4); the driver
// keeps at most this many batches in flight, as the server's engine loop does.
constexpr size_t kMaxInFlight = 3;

Status Drain(std::deque<std::unique_ptr<PendingEmbeddings>>* inflight, size_t keep) {
  while (inflight->size() > keep) {
    auto r = inflight->front()->Wait();
    inflight->pop_front();
    if (!r.ok()) return r.status();
  }
  return Status::Ok();
}

// Submits every batch of a request, waiting for the oldest when kMaxInFlight are out.
Status RunRequest(Engine& engine, const std::vector<Batch>& req,
                  std::deque<std::unique_ptr<PendingEmbeddings>>* inflight) {
  for (const auto& b : req) {
    PETAL_RETURN_IF_ERROR(Drain(inflight, kMaxInFlight - 1));
    PETAL_ASSIGN_OR_RETURN(auto h, engine.Step(b));
    inflight->push_back(std::move(h));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> RunScenario(Engine& engine, const BenchScenario& s, int max_batch_tokens,
                                  int max_batch_seqs, double seconds, int max_iters) {
  std::mt19937 rng(1234);
  const int vocab = engine.config().vocab_size;
  std::deque<std::unique_ptr<PendingEmbeddings>> inflight;
  std::ostringstream js;
  // Warm-up: the first batches of a shape pay one-time costs (and later, graph capture).
  for (int i = 0; i < 3; ++i) {
    auto req = MakeRequest(rng, vocab, s.seqs, s.len, max_batch_tokens, max_batch_seqs, s.spans);
    PETAL_RETURN_IF_ERROR(RunRequest(engine, req, &inflight));
    PETAL_RETURN_IF_ERROR(Drain(&inflight, 0));
  }
  const auto t_end = Clock::now() + std::chrono::duration<double>(seconds);
  if (!s.throughput) {
    std::vector<double> ms;
    while ((Clock::now() < t_end || ms.size() < 10) && static_cast<int>(ms.size()) < max_iters) {
      auto req = MakeRequest(rng, vocab, s.seqs, s.len, max_batch_tokens, max_batch_seqs);
      auto t0 = Clock::now();  // host-side packing is excluded: requests arrive pre-tokenized
      PETAL_RETURN_IF_ERROR(RunRequest(engine, req, &inflight));
      PETAL_RETURN_IF_ERROR(Drain(&inflight, 0));
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    LatencyStats st = Summarise(ms);
    js << "{\"seqs\":" << s.seqs << ",\"len\":" << s.len << "," << LatencyJsonFields(st) << "}";
    std::printf("  %-22s p50 %8.3f  p90 %8.3f  p99 %8.3f  max %8.3f ms  (n=%d)\n", s.name.c_str(),
                st.p50, st.p90, st.p99, st.max, st.n);
  } else {
    // Keep the next request's batches queued behind the current one so the GPU never idles
    // while the host packs inputs.
    int requests = 0;
    auto t0 = Clock::now();
    while ((Clock::now() < t_end || requests < 2) && requests < max_iters) {
      auto req = MakeRequest(rng, vocab, s.seqs, s.len, max_batch_tokens, max_batch_seqs, s.spans);
      PETAL_RETURN_IF_ERROR(RunRequest(engine, req, &inflight));
      ++requests;
    }
    PETAL_RETURN_IF_ERROR(Drain(&inflight, 0));
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    double eps = requests * s.seqs / dt;
    js << "{\"seqs\":" << s.seqs << ",\"len\":" << s.len << ",\"emb_per_s\":" << eps;
    if (s.spans > 0) js << ",\"chunks\":" << s.spans << ",\"chunks_per_s\":" << eps * s.spans;
    js << ",\"requests\":" << requests << ",\"seconds\":" << dt << "}";
    std::printf("  %-22s %10.1f emb/s", s.name.c_str(), eps);
    if (s.spans > 0) std::printf(" = %10.1f chunks/s", eps * s.spans);
    std::printf("  (%d requests in %.2f s)\n", requests, dt);
  }
  std::fflush(stdout);
  return js.str();
}

}  // namespace petal::cli
