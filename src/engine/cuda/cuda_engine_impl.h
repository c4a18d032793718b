// Internals of the CUDA engine (see cuda_engine.h), shared by its source files only.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <memory>
#include <vector>

#include "engine/cuda/cuda_engine.h"
#include "engine/cuda/cuda_model.h"
#include "engine/cuda/fp8_gate.h"
#include "engine/cuda/graph_cache.h"
#include "engine/cuda/profile_window.h"

namespace petal::cuda {

// Returns Internal("what: <cuda error>") unless err is cudaSuccess.
Status CheckCuda(cudaError_t err, const char* what);

// One in-flight batch: page-locked staging for its inputs and its pooled output, and the event
// that marks both "forward done" and "output readable on the host".
// Sparse (SPLADE) models: host_out holds the rows' values and host_sparse their counts then
// indices, both mapped into the device: the compaction kernel writes the entries there directly.
struct RingSlot {
  int32_t* host_in = nullptr;
  float* host_out = nullptr;
  int32_t* host_sparse = nullptr;  // sparse models: [max_seqs] counts, [max_seqs, vocab] indices
  float* dev_values = nullptr;     // the device's addresses of host_out and host_sparse
  int32_t* dev_sparse = nullptr;
  cudaEvent_t done = nullptr;
  std::atomic<bool> busy{false};  // held by a handle that has not copied its result out yet
  RingSlot() = default;
  RingSlot(RingSlot&&) noexcept {}  // slots are created empty, then filled in place
};

class CudaEngine final : public Engine {
 public:
  CudaEngine() = default;
  ~CudaEngine() override;
  Status Init(const std::string& model_dir, const CudaEngineOptions& options);

  const ModelConfig& config() const override { return config_; }
  std::string backend() const override { return "cuda"; }
  StatusOr<std::unique_ptr<PendingEmbeddings>> Step(const Batch& batch) override;
  std::map<std::string, double> Stats() const override;
  std::string Describe() const override { return model_->Describe(); }

 private:
  size_t InputInts() const;

  CudaEngineOptions options_;
  ModelConfig config_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CudaModel> model_;
  Fp8GateResult fp8_gate_;  // --quantize fp8: the start-up gate's result
  int32_t* dev_inputs_ = nullptr;
  float* dev_pooled_ = nullptr;
  std::vector<RingSlot> slots_;
  size_t next_slot_ = 0;
  BucketPolicy buckets_;
  std::unique_ptr<GraphCache> graphs_;
  ProfileWindow profile_;  // PETAL_PROFILE_FORWARDS (profile_window.h)
  int64_t batches_ = 0, padded_tokens_ = 0, real_tokens_ = 0;
  // A multi-vector (ColBERT) model: one output row per token, key lengths staged per batch.
  bool multivector_ = false;
  bool multivector_keys_ = false;  // ... whose expansion tokens are no token's keys
  // A sparse (SPLADE) model: its pooled rows leave the device compacted (LaunchSparseCompact).
  bool sparse_ = false;
};

}  // namespace petal::cuda
