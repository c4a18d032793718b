// The flags of the benchmark subcommands (`petal bench engine|grpc|http|rerank`, and the aliases
// `petal client bench` and `petal bench-http`), bound to the argument structs of src/bench, which
// runs them. Thread-safety: called from main() only, while the command line is set up.
#pragma once

#include <CLI/CLI.hpp>

#include "bench/bench_commands.h"
#include "bench/bench_engine.h"
#include "bench/bench_rerank.h"

namespace petal::cli {

void AddEngineBenchFlags(CLI::App* app, bench::EngineBenchArgs* a);
// Adds every flag but --server (which `petal client` has on itself).
void AddGrpcBenchFlags(CLI::App* app, bench::GrpcBenchArgs* a);
void AddHttpBenchFlags(CLI::App* app, bench::HttpBenchArgs* a);
void AddRerankBenchFlags(CLI::App* app, bench::RerankBenchArgs* a);

}  // namespace petal::cli
