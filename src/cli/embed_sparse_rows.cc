// Sparse rows for `petal embed` (embed_sparse_rows.h). Thread-safety: see the header.
#include "cli/embed_sparse_rows.h"

#include <cstdio>

namespace petal::cli {

void SetSparseTopK(int max_active_dims, Batch* batch) {
  batch->sparse_top_k.clear();
  if (max_active_dims > 0) batch->sparse_top_k.assign(batch->num_seqs(), max_active_dims);
}

void FormatSparseRow(const Embeddings& out, int row, std::string* line) {
  std::vector<int32_t> indices;
  std::vector<float> values;
  if (out.sparse()) {
    indices.assign(out.sparse_indices.begin() + out.sparse_offsets[row],
                   out.sparse_indices.begin() + out.sparse_offsets[row + 1]);
    values.assign(out.sparse_values.begin() + out.sparse_offsets[row],
                  out.sparse_values.begin() + out.sparse_offsets[row + 1]);
  } else {
    for (int v = 0; v < out.dim; ++v) {
      if (out.row(row)[v] > 0) {
        indices.push_back(v);
        values.push_back(out.row(row)[v]);
      }
    }
  }
  FormatSparseEntries(indices, values, line);
}

void FormatSparseEntries(const std::vector<int32_t>& indices, const std::vector<float>& values,
                         std::string* line) {
  char num[32];
  line->assign("{\"indices\":[");
  for (size_t i = 0; i < indices.size(); ++i) {
    const int len = std::snprintf(num, sizeof(num), i ? ",%d" : "%d", indices[i]);
    line->append(num, len);
  }
  line->append("],\"values\":[");
  for (size_t i = 0; i < values.size(); ++i) {
    const int len = std::snprintf(num, sizeof(num), i ? ",%.9g" : "%.9g", values[i]);
    line->append(num, len);
  }
  line->append("]}\n");
}

}  // namespace petal::cli
