// Sparse rows (sparse_rows.h): packing on the server, checked unpacking in the gateway.
// Thread-safety: pure functions.
#include "wire/sparse_rows.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "wire/messages.h"

namespace petal::wire {

namespace {

// Calls fn(v, x) for every value x > 0 of a dense row of `dim` float32s (unaligned bytes), in
// order. Rows are mostly exact zeros (+0.0: all bits clear), so 8 values at a time whose bits
// are all clear are skipped with one test.
template <typename Fn>
void ForEachPositive(const char* row, int dim, Fn&& fn) {
  int v = 0;
  for (; v + 8 <= dim; v += 8) {
    uint64_t w[4];
    std::memcpy(w, row + static_cast<size_t>(v) * sizeof(float), sizeof(w));
    if ((w[0] | w[1] | w[2] | w[3]) == 0) continue;
    float x[8];
    std::memcpy(x, w, sizeof(x));
    for (int k = 0; k < 8; ++k) {
      if (x[k] > 0) fn(v + k, x[k]);
    }
  }
  for (; v < dim; ++v) {
    float x;
    std::memcpy(&x, row + static_cast<size_t>(v) * sizeof(float), sizeof(float));
    if (x > 0) fn(v, x);
  }
}

}  // namespace

SparseRow SparseFromDense(const char* row, int dim) {
  SparseRow r;
  ForEachPositive(row, dim, [&](int v, float x) {
    r.indices.push_back(v);
    r.values.push_back(x);
  });
  return r;
}

void PackSparseRows(std::string_view data, int64_t rows, int dim, v1::EmbedResponse* resp) {
  resp->set_dtype(v1::DTYPE_FLOAT32);
  resp->clear_shape();
  resp->add_shape(static_cast<uint32_t>(rows));
  resp->add_shape(static_cast<uint32_t>(dim));
  resp->set_dimensions(static_cast<uint32_t>(dim));
  resp->clear_data();
  std::string* indices = resp->mutable_sparse_indices();
  std::string* values = resp->mutable_sparse_values();
  indices->clear();
  values->clear();
  const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
  for (int64_t r = 0; r < rows; ++r) {
    const char* row = data.data() + static_cast<size_t>(r) * row_bytes;
    uint32_t count = 0;
    ForEachPositive(row, dim, [&](int v, float x) {
      const int32_t index = v;
      indices->append(reinterpret_cast<const char*>(&index), sizeof(index));  // little-endian host
      values->append(reinterpret_cast<const char*>(&x), sizeof(x));
      ++count;
    });
    resp->add_sparse_counts(count);
  }
}

void PackSparseRows(const std::vector<SparseRow>& rows, int dim, v1::EmbedResponse* resp) {
  resp->set_dtype(v1::DTYPE_FLOAT32);
  resp->clear_shape();
  resp->add_shape(static_cast<uint32_t>(rows.size()));
  resp->add_shape(static_cast<uint32_t>(dim));
  resp->set_dimensions(static_cast<uint32_t>(dim));
  resp->clear_data();
  std::string* indices = resp->mutable_sparse_indices();
  std::string* values = resp->mutable_sparse_values();
  size_t total = 0;
  for (const SparseRow& r : rows) total += r.indices.size();
  indices->clear();
  values->clear();
  indices->reserve(total * sizeof(int32_t));
  values->reserve(total * sizeof(float));
  for (const SparseRow& r : rows) {  // little-endian host
    indices->append(reinterpret_cast<const char*>(r.indices.data()), r.indices.size() * 4);
    values->append(reinterpret_cast<const char*>(r.values.data()), r.values.size() * 4);
    resp->add_sparse_counts(static_cast<uint32_t>(r.indices.size()));
  }
}

StatusOr<std::vector<SparseRow>> DecodeSparseRows(const v1::EmbedResponse& resp, int64_t rows) {
  if (resp.sparse_counts_size() == 0 && rows > 0) {  // dense rows (or a server before the field)
    PETAL_ASSIGN_OR_RETURN(const OutputFormat f, ResponseFormat(resp, rows));
    if (f.dtype != OutputDType::kFloat32)
      return DataLoss("dtype: a sparse model answers float32 rows");
    std::vector<SparseRow> out;
    out.reserve(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      out.push_back(SparseFromDense(resp.data().data() + r * BytesPerRow(f), f.dims));
    }
    return out;
  }
  if (resp.shape_size() != 2 || resp.shape(0) != static_cast<uint64_t>(rows))
    return DataLoss("shape: expected [" + std::to_string(rows) + ", vocab_size]");
  if (resp.sparse_counts_size() != rows)
    return DataLoss("sparse_counts: " + std::to_string(resp.sparse_counts_size()) +
                    " entries for " + std::to_string(rows) + " rows");
  const std::string& idx = resp.sparse_indices();
  const std::string& val = resp.sparse_values();
  if (idx.size() != val.size() || idx.size() % 4 != 0 || !resp.data().empty())
    return DataLoss("sparse_indices / sparse_values: sizes differ or are not whole entries");
  const size_t entries = idx.size() / 4;
  const int64_t dim = resp.dimensions();
  std::vector<SparseRow> out(static_cast<size_t>(rows));
  size_t at = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const uint32_t count = resp.sparse_counts(static_cast<int>(r));
    if (count > entries - at)
      return DataLoss("sparse_counts: more entries than sparse_indices holds");
    SparseRow& row = out[static_cast<size_t>(r)];
    if (count == 0) continue;  // (memcpy of an empty vector's null data() is undefined)
    row.indices.resize(count);
    row.values.resize(count);
    std::memcpy(row.indices.data(), idx.data() + at * 4, count * 4);
    std::memcpy(row.values.data(), val.data() + at * 4, count * 4);
    at += count;
    for (uint32_t k = 0; k < count; ++k) {
      const int32_t i = row.indices[k];
      if (i < 0 || i >= dim || (k > 0 && i <= row.indices[k - 1]) || !(row.values[k] > 0))
        return DataLoss("sparse_indices: row " + std::to_string(r) +
                        " has an index out of order or outside [0, dimensions), or a value <= 0");
    }
  }
  if (at != entries) return DataLoss("sparse_counts: fewer entries than sparse_indices holds");
  return out;
}

}  // namespace petal::wire
