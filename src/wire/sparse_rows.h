// Sparse (SPLADE) rows on the wire (EmbedOptions.sparse, EmbedResponse.sparse_*): the server
// packs each row's non-zero entries (as the engines answer them, or from a dense
// vocabulary-sized float32 row) before answering, and
// the gateway reads rows back from either form (the sparse fields, or dense float32 rows from a
// server that predates them), so both give the same entries. A non-zero is a value > 0: SPLADE
// values are log(1 + relu(x)) >= 0, and NaN is not > 0. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "petal.pb.h"

namespace petal::wire {

// One row's non-zero entries, indices ascending.
struct SparseRow {
  std::vector<int32_t> indices;
  std::vector<float> values;
};

// The non-zero entries of one dense row of `dim` float32s (little-endian bytes, unaligned).
SparseRow SparseFromDense(const char* row, int dim);

// Sets resp's dtype (FLOAT32), shape [rows, dim], dimensions and sparse fields from `rows` dense
// rows of `dim` float32s (`data`, row-major little-endian bytes); leaves resp's data empty.
void PackSparseRows(std::string_view data, int64_t rows, int dim, v1::EmbedResponse* resp);

// The same fields from rows already in sparse form (the engines' answer): no scan.
void PackSparseRows(const std::vector<SparseRow>& rows, int dim, v1::EmbedResponse* resp);

// The rows of a sparse model's answer for a request of `rows` rows: from the sparse fields when
// sparse_counts is set (checked: one count per row, counts summing to the packed entries, indices
// ascending inside [0, dimensions), values > 0), else from dense FLOAT32 data. DataLoss on a
// malformed answer, naming the field.
StatusOr<std::vector<SparseRow>> DecodeSparseRows(const v1::EmbedResponse& resp, int64_t rows);

}  // namespace petal::wire
