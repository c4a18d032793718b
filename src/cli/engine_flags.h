// Command-line flags shared by every subcommand that runs an engine (--backend, capacity).
#pragma once

#include <CLI/CLI.hpp>

#include "engine/engine_factory.h"

namespace petal::cli {

// Adds --backend, --max-batch-tokens, --max-batch-seqs and --device to `app`, bound to `opts`.
inline void AddEngineFlags(CLI::App* app, EngineOptions* opts) {
  app->add_option("--backend", opts->backend, "Engine backend: auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app->add_option("--max-batch-tokens", opts->cuda.max_tokens, "CUDA engine: most tokens per batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--max-batch-seqs", opts->cuda.max_seqs, "CUDA engine: most sequences per batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--device", opts->cuda.device, "CUDA device index")->capture_default_str();
}

}  // namespace petal::cli
