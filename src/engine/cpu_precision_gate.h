// The CPU engine's start-up fidelity gate for reduced-precision paths (`--cpu-precision auto`
// choosing bf16; the design's 0.1% rule, as the CUDA fp8 gate): a fixed probe batch of random
// tokens (seeded; 4 sequences of 7 to 128 tokens, within the model's positions) runs through the
// candidate model and through the fp32 reference model; the result is the smallest cosine
// between the two pooled (not normalised) states of any sequence. Start-up only.
// Thread-safety: pure function over two immutable models (each forward may use OpenMP).
#pragma once

#include "common/status.h"
#include "engine/batch.h"
#include "model/model.h"

namespace petal {

inline constexpr double kCpuGateMinCosine = 0.999;

struct CpuGateResult {
  double min_cosine = 1.0;
  int sequences = 0;
  int tokens = 0;
};

// The gate's probe batch for a model (the same one every time for the same config).
Batch CpuGateProbeBatch(const ModelConfig& config);

// Runs the probe batch through both models and compares their pooled states.
StatusOr<CpuGateResult> RunCpuFidelityGate(const CpuModel& candidate, const CpuModel& reference);

}  // namespace petal
