// JSON pieces shared by the benchmark subcommands (`petal bench engine|grpc|http`), so that
// every results file spells latency fields the same way (bench/report.py reads them) and is
// written the same way. Thread-safety: pure functions, no shared state.
#pragma once

#include <string>

#include "bench/bench_engine.h"
#include "common/json_literal.h"

namespace petal::bench {

// `"p50_ms":..,"p90_ms":..,"p99_ms":..,"max_ms":..,"mean_ms":..,"n":..` (no braces), so that a
// caller can add its own fields to the same object.
std::string LatencyJsonFields(const LatencyStats& st);

// Writes `text` (JSON, or a text companion file) to `path` (nothing when `path` is empty) and says
// so on stdout. Returns the process exit code: 0, or 1 after an error message on stderr.
// `quiet` skips the message: runners rewrite the file after every scenario, so that a run cut
// short by a time limit still leaves the scenarios it finished.
int WriteResultFile(const std::string& path, const std::string& text, bool quiet = false);

}  // namespace petal::bench
