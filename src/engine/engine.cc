// Engine helpers shared by every backend: Embed() (Step + Wait), the sparse form of SPLADE rows
// (engine.h, Embeddings) and the recycled row buffers. Thread-safety: pure functions, but for
// the row buffers' free list (locked; any thread).
#include "engine/engine.h"

#include <algorithm>

#include "common/recycler.h"
#include "kernels/cpu/reference_ops.h"

namespace petal {

namespace {

Recycler<std::vector<float>>& RowBuffers() {
  // Never destroyed: buffers may come back from threads still running at exit.
  static auto* buffers = new Recycler<std::vector<float>>(
      {.max_kept = 8,
       .max_bytes = size_t{16} << 20,
       .max_total_bytes = size_t{64} << 20,
       .reset = [](std::vector<float>& v) { v.clear(); },
       .bytes = [](const std::vector<float>& v) { return v.capacity() * sizeof(float); }});
  return *buffers;
}

}  // namespace

std::vector<float> TakeRowBuffer() { return RowBuffers().Take(); }
void RecycleRowBuffer(std::vector<float>&& buffer) { RowBuffers().Give(std::move(buffer)); }

StatusOr<Embeddings> Engine::Embed(const Batch& batch) {
  PETAL_ASSIGN_OR_RETURN(auto pending, Step(batch));
  return pending->Wait();
}

std::vector<float> Embeddings::DenseRow(int i) const {
  if (!sparse()) return std::vector<float>(row(i), row(i) + dim);
  std::vector<float> out(static_cast<size_t>(dim), 0.0f);
  for (int64_t e = sparse_offsets[i]; e < sparse_offsets[i + 1]; ++e)
    out[static_cast<size_t>(sparse_indices[e])] = sparse_values[e];
  return out;
}

void Embeddings::SetSparseRows(const int32_t* counts, const int32_t* indices, const float* values,
                               int64_t stride) {
  sparse_offsets.assign(1, 0);
  for (int r = 0; r < rows; ++r) sparse_offsets.push_back(sparse_offsets.back() + counts[r]);
  sparse_indices.clear();
  sparse_values.clear();
  sparse_indices.reserve(static_cast<size_t>(sparse_offsets.back()));
  sparse_values.reserve(static_cast<size_t>(sparse_offsets.back()));
  for (int r = 0; r < rows; ++r) {
    const int64_t at = r * stride;
    sparse_indices.insert(sparse_indices.end(), indices + at, indices + at + counts[r]);
    sparse_values.insert(sparse_values.end(), values + at, values + at + counts[r]);
  }
}

Embeddings Embeddings::SparseFromDense(const float* dense, int rows, int dim,
                                       const int32_t* top_k) {
  Embeddings e;
  e.rows = rows;
  e.dim = dim;
  e.sparse_offsets.assign(1, 0);
  std::vector<int32_t> idx(static_cast<size_t>(dim));
  std::vector<float> val(static_cast<size_t>(dim));
  for (int r = 0; r < rows; ++r) {
    int32_t n = 0;
    cpu::SparseCompact(dense + static_cast<int64_t>(r) * dim, dim, 1, dim,
                       top_k != nullptr ? top_k + r : nullptr, dim, &n, idx.data(), val.data());
    e.sparse_indices.insert(e.sparse_indices.end(), idx.begin(), idx.begin() + n);
    e.sparse_values.insert(e.sparse_values.end(), val.begin(), val.begin() + n);
    e.sparse_offsets.push_back(static_cast<int64_t>(e.sparse_indices.size()));
  }
  return e;
}

}  // namespace petal
