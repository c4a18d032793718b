// The start-up fidelity gate of `--quantize fp8` (the design's 0.1% rule): one warm-up batch of
// random tokens (sequence lengths 1 to 1024, at least Capacity::fp8_min_tokens tokens in all, so
// the fp8 path engages) runs through the model on the fp8 path and again on the bf16 path; the
// result is the smallest cosine between the two pooled embeddings of any sequence. The engine
// refuses to start when it is below kFp8GateMinCosine. Runs eagerly (no graph capture), allocates
// its own buffers and synchronises `stream`: start-up only. Thread-safety: engine thread only.
#pragma once

#include <cuda_runtime.h>

#include "common/status.h"
#include "engine/cuda/cuda_model.h"

namespace petal::cuda {

inline constexpr double kFp8GateMinCosine = 0.999;

struct Fp8GateResult {
  double min_cosine = 1.0;
  int sequences = 0;
  int tokens = 0;
};

// FailedPrecondition when the capacity cannot hold a batch that reaches fp8_min_tokens (the fp8
// path would then never run). Leaves the model's fp8 switch on.
StatusOr<Fp8GateResult> RunFp8Gate(CudaModel& model, const Capacity& cap, int max_seq_len,
                                   cudaStream_t stream);

}  // namespace petal::cuda
