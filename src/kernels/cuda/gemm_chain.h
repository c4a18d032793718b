// Internal to the GEMM tuner: times one candidate the way a captured forward pass runs it, as a
// chain of back-to-back launches in one CUDA graph, each over its own copy of the weights, so
// the weights come from HBM (the copies span more than the L2) while the activations stay hot,
// and no launch carries the event and ramp-up of a lone timed launch (about 5-6 us of a 3-10 us
// small-M GEMM measured that way). Off by default; `PETAL_GEMM_TUNE_CHAIN=M` (or
// GemmOptions::chain_max_m) turns it on for M <= M. Thread-safety: a ChainTimer belongs to one
// Gemm (not thread-safe); capture uses cudaStreamCaptureModeThreadLocal, so other threads'
// work is not captured.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm.h"

namespace petal::cuda {

// The M up to which candidates are timed as chains: PETAL_GEMM_TUNE_CHAIN when set (a number;
// 0 turns chains off), else `option`.
int ChainTuningMaxM(int option);

class ChainTimer {
 public:
  ChainTimer() = default;
  ~ChainTimer() { Release(); }
  ChainTimer(const ChainTimer&) = delete;
  ChainTimer& operator=(const ChainTimer&) = delete;

  using Launch = std::function<Status(const GemmParams&)>;

  // Fills the pool (allocated at the first call, `pool_bytes`) with up to 64 copies of p's
  // weights (w, or w8 for fp8) on `stream`; Enqueue() walks them. Weights larger than half the
  // pool are not copied: the chain then reuses p's own weights, larger than the L2 themselves.
  // Weights so small that 64 copies fit in the L2 stay partly hot, as a small model's do.
  Status Prepare(const GemmParams& p, size_t pool_bytes, cudaStream_t stream);

  // Captures `launches` calls of `launch` (call r with the weights of copy r % copies) into a
  // graph, replays it once to warm up and `timed` more times between events, all enqueued on
  // `stream` without synchronising. Returns false when the stream cannot capture (the legacy
  // default stream) or the candidate could not be captured (the capture is then ended and the
  // stream left usable). Collect() reads the times after the caller has synchronised the stream.
  StatusOr<bool> Enqueue(const Launch& launch, const GemmParams& p, int timed, cudaStream_t stream);
  // Per enqueued candidate (in order), the median over its timed replays of one launch's time in
  // microseconds. Releases the graphs and events.
  StatusOr<std::vector<float>> Collect();

  int copies() const { return copies_; }
  int launches() const { return launches_; }

 private:
  struct Entry {
    cudaGraphExec_t exec = nullptr;
    std::vector<cudaEvent_t> events;  // start, end per timed replay
  };
  void Release();

  DeviceBuffer<uint8_t> pool_;
  size_t stride_ = 0;  // bytes between copies (the weights' size, rounded up to 256)
  int copies_ = 0;     // 0: the chain uses p's own weights
  int launches_ = 0;
  std::vector<Entry> entries_;
};

}  // namespace petal::cuda
