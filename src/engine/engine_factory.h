// Chooses and creates an engine for a model folder: "cuda" where a GPU is present (and compiled
// in), otherwise the CPU reference engine. Thread-safety: free functions, no shared state.
#pragma once

#include <memory>
#include <string>

#include "engine/cpu_engine.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/engine.h"

namespace petal {

struct EngineOptions {
  std::string backend = "auto";  // "auto" | "cpu" | "cuda"
  CudaEngineOptions cuda;
  // petal calibrate: receives every fp8 GEMM input's per-token maxima of each Step() (CPU: the
  // fp32 forward; CUDA: the bf16 path, run eagerly). Not owned; must outlive the engine.
  ActivationObserver* observer = nullptr;
  CpuEngineOptions cpu;
};

// Creates the engine named by options.backend; "auto" picks cuda when CudaAvailable().
StatusOr<std::unique_ptr<Engine>> CreateEngine(const std::string& model_dir,
                                               const EngineOptions& options);

}  // namespace petal
