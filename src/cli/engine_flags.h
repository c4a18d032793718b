// Command-line flags shared by every subcommand that runs an engine (--backend, capacity).
#pragma once

#include <CLI/CLI.hpp>

#include "engine/engine_factory.h"

namespace petal::cli {

// --quantize, --fp8-min-tokens, --fp8-layers, --no-fp8-gate, --fp8-scales (CUDA engine), bound to
// `cuda`.
inline void AddQuantizeFlags(CLI::App* app, CudaEngineOptions* cuda) {
  app->add_option("--quantize", cuda->quantize,
                  "CUDA engine: none (bf16) or fp8 (e4m3 dense layers, Hopper; Qwen3 models)")
      ->check(CLI::IsMember({"none", "fp8"}))
      ->capture_default_str();
  app->add_option("--fp8-min-tokens", cuda->fp8_min_tokens,
                  "--quantize fp8: smallest batch (tokens) that runs in fp8 (at least 2048); "
                  "smaller ones use bf16")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_option("--fp8-layers", cuda->fp8_layers,
                  "--quantize fp8: which dense layers run in fp8: all (QKV, O, MLP) or mlp")
      ->check(CLI::IsMember({"all", "mlp"}))
      ->capture_default_str();
  app->add_flag("!--no-fp8-gate", cuda->fp8_gate,
                "--quantize fp8: skip the start-up fidelity check against the bf16 path");
  app->add_option("--fp8-scales", cuda->fp8_scales,
                  "--quantize fp8: static activation scales from DIR/fp8_scales.json (written by "
                  "petal calibrate for this model) instead of per-token ones");
}

// --cpu-precision, --cpu-threads (CPU engine), bound to `cpu`.
inline void AddCpuFlags(CLI::App* app, CpuEngineOptions* cpu) {
  app->add_option("--cpu-precision", cpu->precision,
                  "CPU engine: auto (bf16 where the CPU has AVX512-BF16/AMX and the model keeps "
                  "cosine >= 0.999 against fp32 on a probe batch at load, else fast fp32 where "
                  "the CPU has AVX2), fp32, bf16 (bf16 GEMMs, fp32 accumulation; needs "
                  "AVX512-BF16 or AMX), int8 (dynamic per-token activations, 7-bit per-channel "
                  "weights; misses the 0.999 fidelity rule on MiniLM), or reference (the fp32 "
                  "reference)")
      ->check(CLI::IsMember({"auto", "fp32", "int8", "bf16", "reference"}))
      ->capture_default_str();
  app->add_option("--cpu-threads", cpu->threads,
                  "CPU engine: OpenMP threads (0: OMP_NUM_THREADS, else the CPUs this process may "
                  "use)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

// Adds the engine flags (backend, capacity, device, CUDA graph buckets, CPU precision) to `app`,
// bound to `opts`.
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
  app->add_flag("!--no-graphs", opts->cuda.use_graphs, "CUDA engine: run every batch eagerly");
  app->add_option("--token-bucket", opts->cuda.token_bucket_small,
                  "CUDA graphs: token bucket below --bucket-threshold")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--token-bucket-large", opts->cuda.token_bucket_large,
                  "CUDA graphs: token bucket above --bucket-threshold")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--bucket-threshold", opts->cuda.bucket_threshold,
                  "CUDA graphs: token count where buckets switch from small to large")
      ->capture_default_str();
  app->add_option("--max-graphs", opts->cuda.max_graphs, "CUDA graphs kept (LRU)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--attention", opts->cuda.attention,
                  "CUDA attention backend: auto (timed at first use per shape), flash or cudnn")
      ->check(CLI::IsMember({"auto", "flash", "cudnn"}))
      ->capture_default_str();
  AddQuantizeFlags(app, &opts->cuda);
  AddCpuFlags(app, &opts->cpu);
}

}  // namespace petal::cli
