// The engine interface: one forward pass over a ragged batch, returning pooled embeddings.
//
// Step() never waits for the device: it returns a PendingEmbeddings handle whose Wait() is the
// only synchronisation point (the CPU engine computes eagerly and returns a completed handle).
// Thread-safety: an Engine is driven by one thread at a time (the server's engine loop);
// PendingEmbeddings handles may be waited on from another thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/batch.h"
#include "model/config.h"

namespace petal {

// Row-major [rows, dim] float32 outputs, one row per sequence of the batch: pooled embeddings
// (dim = hidden_size) or, for ranking models, relevance logits (dim = config.score_outputs).
// Sparse (SPLADE) models answer in the sparse form instead (sparse() true, `data` empty): row i's
// non-zero entries (values > 0, indices ascending in [0, dim = vocab_size); only the
// Batch::sparse_top_k[i] largest where the batch sets it) are entries
// [sparse_offsets[i], sparse_offsets[i + 1]) of sparse_indices / sparse_values.
struct Embeddings {
  int rows = 0;
  int dim = 0;
  std::vector<float> data;
  std::vector<int64_t> sparse_offsets;  // rows + 1 in the sparse form, else empty
  std::vector<int32_t> sparse_indices;
  std::vector<float> sparse_values;
  const float* row(int i) const { return data.data() + static_cast<size_t>(i) * dim; }
  bool sparse() const { return !sparse_offsets.empty(); }
  // The sparse form of `rows` dense rows of `dim` floats (cpu::SparseCompact; top_k: null or
  // one per row, 0 = every non-zero).
  static Embeddings SparseFromDense(const float* dense, int rows, int dim, const int32_t* top_k);
  // Sets the sparse form of `rows` rows from counts[r] entries at indices / values + r * stride.
  void SetSparseRows(const int32_t* counts, const int32_t* indices, const float* values,
                     int64_t stride);
  // Row i as `dim` floats (zeros where the sparse form has no entry), either form.
  std::vector<float> DenseRow(int i) const;
};

// Dense row buffers recycled between batches, so that a warm engine's Step allocates no result
// storage: an engine fills TakeRowBuffer()'s vector (empty, with the capacity it had) as
// Embeddings::data, and whoever is done with an Embeddings gives its buffer back with
// RecycleRowBuffer (the server's engine loop does, once the rows are stored). Both are optional:
// an Embeddings whose buffer is never given back is simply freed. At most 8 buffers of at most
// 16 MiB are kept. Thread-safety: any thread.
std::vector<float> TakeRowBuffer();
void RecycleRowBuffer(std::vector<float>&& buffer);

class PendingEmbeddings {
 public:
  virtual ~PendingEmbeddings() = default;
  // True once Wait() would not block.
  virtual bool Ready() = 0;
  // Blocks until the result is readable; may be called once.
  virtual StatusOr<Embeddings> Wait() = 0;
};

// A handle that is already complete (used by eager engines and for errors).
class ReadyEmbeddings final : public PendingEmbeddings {
 public:
  explicit ReadyEmbeddings(StatusOr<Embeddings> result) : result_(std::move(result)) {}
  bool Ready() override { return true; }
  StatusOr<Embeddings> Wait() override { return std::move(result_); }

 private:
  StatusOr<Embeddings> result_;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const ModelConfig& config() const = 0;
  // Backend name for logs and stats: "cpu", "cuda".
  virtual std::string backend() const = 0;
  // Enqueues the forward pass for `batch`; pooled (and, if the model says so, L2-normalised)
  // full-dimension embeddings come back through the handle, or, for a ranking model
  // (config().task == kScore), its score_outputs logits per sequence (config().OutputDim()).
  // Step copies what it needs from `batch` before it returns: the caller may reuse the batch.
  virtual StatusOr<std::unique_ptr<PendingEmbeddings>> Step(const Batch& batch) = 0;
  // Step() followed by Wait().
  StatusOr<Embeddings> Embed(const Batch& batch);
  // Counters for logs, benchmarks and metrics (e.g. graph captures and replays); may be empty.
  virtual std::map<std::string, double> Stats() const { return {}; }
  // A human-readable report of runtime choices (e.g. GEMM algorithms per shape); may be empty.
  virtual std::string Describe() const { return {}; }
};

}  // namespace petal
