// `petal bench`: the benchmark subcommands. `engine` runs the design brief's engine-level
// scenarios in-process; `grpc` and `http` drive a running server or gateway (bench_grpc.cc,
// bench_http.cc). `petal bench-http` stays as an alias of `petal bench http`.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <random>
#include <thread>

#include "cli/bench_commands.h"
#include "cli/bench_engine.h"
#include "cli/bench_json.h"
#include "cli/bench_rerank.h"
#include "cli/command.h"
#include "cli/engine_flags.h"
#include "cli/model_arg.h"
#include "common/git_sha.h"
#include "engine/cpu_engine.h"
#include "wire/codec.h"

namespace petal::cli {
namespace {

struct BenchArgs {
  std::string model;
  std::string out;
  std::string scenarios;
  double seconds = 5.0;
  int max_iters = 2000;
  bool check = true;
  EngineOptions engine;
};

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
  for (int r = 0; r < got.rows; ++r)
    worst = std::min(worst, wire::CosineSimilarity(got.row(r), ref.row(r), got.dim));
  return worst;
}

int RunBenchEngine(const BenchArgs& a) {
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

std::function<int()> SetupBench(CLI::App* app) {
  auto args = std::make_shared<BenchArgs>();
  app->require_subcommand(1);
  CLI::App* eng =
      app->add_subcommand("engine", "In-process engine scenarios (latency and throughput)");
  eng->add_option("--model", args->model, "Model folder or hub id ORG/NAME[@REV]")->required();
  eng->add_option("--out", args->out, "Write results JSON here");
  eng->add_option("--scenarios", args->scenarios, "Comma-separated subset (default: all)");
  eng->add_option("--seconds", args->seconds, "Time per scenario")->capture_default_str();
  eng->add_option("--max-iters", args->max_iters, "Most requests per scenario")
      ->capture_default_str();
  eng->add_flag("!--no-check", args->check, "Skip the warm-up check against the CPU reference");
  AddEngineFlags(eng, &args->engine);
  auto grpc_args = std::make_shared<GrpcBenchArgs>();
  CLI::App* grpc = app->add_subcommand(
      "grpc", "Pre-tokenized scenarios against a running `petal server` (alias: client bench)");
  grpc->add_option("--server", grpc_args->server, "Server address host:port")
      ->capture_default_str();
  AddGrpcBenchFlags(grpc, grpc_args.get());
  auto http_args = std::make_shared<HttpBenchArgs>();
  CLI::App* http = app->add_subcommand(
      "http", "Texts of ~512 tokens through a running gateway, 1..16 concurrent clients");
  AddHttpBenchFlags(http, http_args.get());
  auto rerank_args = std::make_shared<RerankBenchArgs>();
  CLI::App* rerank = app->add_subcommand(
      "rerank",
      "1 query x N documents (pairs) through the in-process engine loop: sequential "
      "p50/p99 and pairs/s with concurrent clients");
  AddRerankBenchFlags(rerank, rerank_args.get());
  return [=] {
    if (grpc->parsed()) return RunBenchGrpc(*grpc_args);
    if (http->parsed()) return RunBenchHttp(*http_args);
    if (rerank->parsed()) {
      if (!ResolveModelFlag("petal bench rerank", &rerank_args->model)) return 1;
      return RunBenchRerank(*rerank_args);
    }
    if (!ResolveModelFlag("petal bench engine", &args->model)) return 1;
    return RunBenchEngine(*args);
  };
}

// The name `petal bench-http` predates `petal bench http`; scripts may still call it.
std::function<int()> SetupBenchHttpAlias(CLI::App* app) {
  auto a = std::make_shared<HttpBenchArgs>();
  AddHttpBenchFlags(app, a.get());
  return [a] { return RunBenchHttp(*a); };
}

}  // namespace
}  // namespace petal::cli

PETAL_REGISTER_COMMAND(bench, "bench",
                       "Benchmarks: engine (in-process), grpc (against a server), http (through "
                       "a gateway)",
                       petal::cli::SetupBench);
PETAL_REGISTER_COMMAND(bench_http, "bench-http", "Alias of `petal bench http`",
                       petal::cli::SetupBenchHttpAlias);
