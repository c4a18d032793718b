// `petal embed` on a sparse (SPLADE) model: each input's non-zero vocabulary entries as one JSON
// object per line, {"indices": [...], "values": [...]} in index order (the shape of /v1/embeddings
// with "sparse": true), optionally only the --max-active-dims largest (Batch::sparse_top_k).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/batch.h"
#include "engine/engine.h"

namespace petal::cli {

// Sets every sequence of `batch` to keep its `max_active_dims` largest values (0: all).
void SetSparseTopK(int max_active_dims, Batch* batch);

// One row's entries as "{\"indices\":[...],\"values\":[...]}\n" (values as %.9g).
void FormatSparseEntries(const std::vector<int32_t>& indices, const std::vector<float>& values,
                         std::string* line);

// Row `row` of a sparse model's answer as "{\"indices\":[...],\"values\":[...]}\n" (either form
// of Embeddings: the engines answer the sparse one).
void FormatSparseRow(const Embeddings& out, int row, std::string* line);

}  // namespace petal::cli
