// FakeEngine: a test double for Engine, so the server can be exercised without a model (unit
// and e2e tests, and `petal server --fake-engine` for gateway development).
//
// Embeddings are a deterministic function of each sequence's token ids (FakeEngine::Reference),
// so a client can check it got exactly its own rows. Like a GPU engine, Step() returns at once
// and the handle becomes ready later: batches complete one after another, each taking
// per_batch + per_token * tokens. Hold() stalls every handle's Wait() until Release(), to build
// queues deterministically. Thread-safety: Step() from one thread at a time (as for any Engine);
// Hold/Release/batches/FailNextSteps from any thread; handles may be waited on from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/engine.h"

namespace petal::server {

struct FakeEngineOptions {
  int hidden_size = 32;
  int vocab_size = 1000;
  int max_positions = 512;
  bool normalize = true;
  std::chrono::microseconds per_batch{0};
  std::chrono::nanoseconds per_token{0};
  // Result slots, as CudaEngineOptions::ring_slots: with n > 0, a Step() while n handles are
  // still un-waited fails with RESOURCE_EXHAUSTED like the CUDA engine's. 0 = unlimited.
  int result_slots = 0;
  // Rows from a hash of each sequence's ids instead of Reference()'s per-token sums: no work per
  // token, for measuring the path around the engine (`petal embed --fake-engine`).
  bool hashed_rows = false;
};

struct FakeBatchRecord {
  int num_seqs = 0;
  int num_tokens = 0;
  std::vector<int32_t> first_tokens;  // each sequence's first token id, in batch order
};

class FakeEngine final : public Engine {
 public:
  explicit FakeEngine(FakeEngineOptions options = {});
  const ModelConfig& config() const override { return config_; }
  std::string backend() const override { return "fake"; }
  StatusOr<std::unique_ptr<PendingEmbeddings>> Step(const Batch& batch) override;

  // The embedding FakeEngine produces for one sequence (hidden_size floats).
  static std::vector<float> Reference(const std::vector<int32_t>& ids, const FakeEngineOptions& o);
  // The row with hashed_rows: values in (-1, 1) from a hash of ids, normalised if o.normalize.
  static std::vector<float> HashedReference(const int32_t* ids, size_t n,
                                            const FakeEngineOptions& o);

  void Hold();
  void Release();
  // The next `n` Step() calls fail with INTERNAL.
  void FailNextSteps(int n);
  // The batches run so far, oldest first; a long-running `petal serve --fake-engine` keeps only
  // the most recent kKeptBatches to 2 x kKeptBatches of them.
  std::vector<FakeBatchRecord> batches() const;
  static constexpr size_t kKeptBatches = 4096;
  // {"batches": n} (every batch run), so the server's pass-through of engine counters can be
  // tested.
  std::map<std::string, double> Stats() const override;

  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool held = false;
  };

 private:
  const FakeEngineOptions options_;
  ModelConfig config_;
  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  std::chrono::steady_clock::time_point device_free_{};  // when the simulated device goes idle
  mutable std::mutex mu_;
  std::vector<FakeBatchRecord> batches_;
  size_t batches_run_ = 0;
  int fail_next_ = 0;
  std::shared_ptr<std::atomic<int>> held_ = std::make_shared<std::atomic<int>>(0);  // un-waited
};

}  // namespace petal::server
