#include "bench/bench_engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "bench/bench_json.h"
#include "common/git_sha.h"
#include "engine/cpu_engine.h"
#include "engine/cuda/cuda_engine.h"
#include "wire/codec.h"

namespace petal::bench {

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

namespace {

// Before timing, the engine's output must agree with the CPU fp32 reference (cosine >= 0.999,
// the design brief's 0.1% rule) on a small ragged batch.
StatusOr<double> CheckAgainstCpu(Engine& engine, const std::string& model_dir) {
  PETAL_ASSIGN_OR_RETURN(auto cpu, CpuEngine::Load(model_dir, {.precision = "reference"}));
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> tok(0, engine.config().vocab_size - 1);
  Batch b;
  for (int len : {1, 17, 64, 200}) {
    std::vector<int32_t> ids(len);
    for (auto& t : ids) t = tok(rng);
    b.Add(ids);
  }
  PETAL_ASSIGN_OR_RETURN(Embeddings got, engine.Embed(b));
  PETAL_ASSIGN_OR_RETURN(Embeddings ref, cpu->Embed(b));
  double worst = 1.0;
  for (int r = 0; r < got.rows; ++r) {  // DenseRow: a sparse model's rows come as entries
    const std::vector<float> g = got.DenseRow(r), w = ref.DenseRow(r);
    worst = std::min(worst, wire::CosineSimilarity(g.data(), w.data(), got.dim));
  }
  return worst;
}

}  // namespace

int RunBenchEngine(const EngineBenchArgs& a) {
  auto engine_or = CreateEngine(a.model, a.engine);
  if (!engine_or.ok()) {
    std::fprintf(stderr, "error: %s\n", engine_or.status().ToString().c_str());
    return 1;
  }
  Engine& engine = **engine_or;
  const bool cuda = engine.backend() == "cuda";
  std::printf("petal bench engine: model %s, backend %s (%s), sha %s\n", a.model.c_str(),
              engine.backend().c_str(), cuda ? CudaDeviceName(a.engine.cuda.device).c_str() : "cpu",
              PETAL_GIT_SHA);
  double worst_cos = -1;
  if (a.check) {
    auto c = CheckAgainstCpu(engine, a.model);
    if (!c.ok()) {
      std::fprintf(stderr, "error: warm-up check failed: %s\n", c.status().ToString().c_str());
      return 1;
    }
    worst_cos = *c;
    std::printf("  warm-up check vs CPU fp32: worst cosine %.6f (need >= 0.999)\n", worst_cos);
    if (worst_cos < 0.999) {
      std::fprintf(stderr, "error: embeddings deviate from the CPU reference; not timing\n");
      return 1;
    }
  }
  const int max_tokens = cuda ? a.engine.cuda.max_tokens : 16384;
  const int max_seqs = cuda ? a.engine.cuda.max_seqs : 512;
  std::string json = "{\"tool\":\"petal bench engine\",\"sha\":\"" + std::string(PETAL_GIT_SHA) +
                     "\",\"model\":\"" + a.model + "\",\"backend\":\"" + engine.backend() +
                     "\",\"device\":\"" +
                     (cuda ? CudaDeviceName(a.engine.cuda.device) : std::string("cpu")) +
                     "\",\"max_batch_tokens\":" + std::to_string(max_tokens) +
                     ",\"max_batch_seqs\":" + std::to_string(max_seqs) +
                     ",\"cpu_threads\":" + std::to_string(std::thread::hardware_concurrency()) +
                     ",\"check_worst_cosine\":" + std::to_string(worst_cos) +
                     ",\"graphs\":" + (a.engine.cuda.use_graphs ? "true" : "false") +
                     ",\"quantize\":\"" + (cuda ? a.engine.cuda.quantize : std::string("none")) +
                     "\",\"fp8_min_tokens\":" + std::to_string(a.engine.cuda.fp8_min_tokens) +
                     ",\"token_bucket\":" + std::to_string(a.engine.cuda.token_bucket_small) +
                     ",\"token_bucket_large\":" + std::to_string(a.engine.cuda.token_bucket_large) +
                     ",\"bucket_threshold\":" + std::to_string(a.engine.cuda.bucket_threshold) +
                     ",\"scenarios\":{";
  bool first = true;
  for (const auto& s : StandardScenarios(a.scenarios)) {
    auto r = RunScenario(engine, s, max_tokens, max_seqs, a.seconds, a.max_iters);
    if (!r.ok()) {
      std::fprintf(stderr, "error in %s: %s\n", s.name.c_str(), r.status().ToString().c_str());
      return 1;
    }
    json += (first ? "\"" : ",\"") + s.name + "\":" + *r;
    first = false;
    WriteResultFile(a.out, json + "}}\n", /*quiet=*/true);
  }
  json += "},\"engine_stats\":{";
  first = true;
  std::printf("  engine stats:");
  for (const auto& [k, v] : engine.Stats()) {
    json += (first ? "\"" : ",\"") + k + "\":" + std::to_string(v);
    std::printf(" %s=%g", k.c_str(), v);
    first = false;
  }
  std::printf("\n");
  json += "}}\n";
  if (const std::string d = engine.Describe(); !d.empty()) {
    std::printf("  kernel choices:\n%s\n", d.c_str());
    if (!a.out.empty() && WriteResultFile(a.out + ".kernels.txt", d + "\n") != 0) return 1;
  }
  return WriteResultFile(a.out, json);
}

}  // namespace petal::bench
