// `petal bench`: the benchmark subcommands. `engine` runs the design brief's engine-level
// scenarios in-process; `grpc` and `http` drive a running server or gateway; `rerank` runs query x
// documents through the in-process engine loop. The runners are in src/bench, their flags in
// bench_flags.cc. `petal bench-http` stays as an alias of `petal bench http`.
#include "bench/bench_commands.h"
#include "bench/bench_engine.h"
#include "bench/bench_rerank.h"
#include "cli/bench_flags.h"
#include "cli/command.h"
#include "cli/model_arg.h"

namespace petal::cli {
namespace {

std::function<int()> SetupBench(CLI::App* app) {
  auto args = std::make_shared<bench::EngineBenchArgs>();
  app->require_subcommand(1);
  CLI::App* eng =
      app->add_subcommand("engine", "In-process engine scenarios (latency and throughput)");
  AddEngineBenchFlags(eng, args.get());
  auto grpc_args = std::make_shared<bench::GrpcBenchArgs>();
  CLI::App* grpc = app->add_subcommand(
      "grpc", "Pre-tokenized scenarios against a running `petal server` (alias: client bench)");
  grpc->add_option("--server", grpc_args->server, "Server address host:port")
      ->capture_default_str();
  AddGrpcBenchFlags(grpc, grpc_args.get());
  auto http_args = std::make_shared<bench::HttpBenchArgs>();
  CLI::App* http = app->add_subcommand(
      "http", "Texts of ~512 tokens through a running gateway, 1..16 concurrent clients");
  AddHttpBenchFlags(http, http_args.get());
  auto rerank_args = std::make_shared<bench::RerankBenchArgs>();
  CLI::App* rerank = app->add_subcommand(
      "rerank",
      "1 query x N documents (pairs) through the in-process engine loop: sequential "
      "p50/p99 and pairs/s with concurrent clients");
  AddRerankBenchFlags(rerank, rerank_args.get());
  return [=] {
    if (grpc->parsed()) return bench::RunBenchGrpc(*grpc_args);
    if (http->parsed()) return bench::RunBenchHttp(*http_args);
    if (rerank->parsed()) {
      if (!ResolveModelFlag("petal bench rerank", &rerank_args->model)) return 1;
      return bench::RunBenchRerank(*rerank_args);
    }
    if (!ResolveModelFlag("petal bench engine", &args->model)) return 1;
    return bench::RunBenchEngine(*args);
  };
}

// The name `petal bench-http` predates `petal bench http`; scripts may still call it.
std::function<int()> SetupBenchHttpAlias(CLI::App* app) {
  auto a = std::make_shared<bench::HttpBenchArgs>();
  AddHttpBenchFlags(app, a.get());
  return [a] { return bench::RunBenchHttp(*a); };
}

}  // namespace
}  // namespace petal::cli

PETAL_REGISTER_COMMAND(bench, "bench",
                       "Benchmarks: engine (in-process), grpc (against a server), http (through "
                       "a gateway)",
                       petal::cli::SetupBench);
PETAL_REGISTER_COMMAND(bench_http, "bench-http", "Alias of `petal bench http`",
                       petal::cli::SetupBenchHttpAlias);
