// Engine rows into request results (row_output.h). Thread-safety: see the header.
#include "server/row_output.h"

#include <cstring>

#include "wire/recycled.h"

namespace petal::server {

void SizeResult(int rows, EmbedResult* result) {
  result->rows = rows;
  if (result->format.sparse) {
    result->sparse_rows.resize(static_cast<size_t>(rows));
    return;
  }
  // A recycled buffer (wire/recycled.h): its owner gives it back when the request is done.
  if (result->data.capacity() <= std::string().capacity()) result->data = wire::TakeByteBuffer();
  result->data.resize(static_cast<size_t>(rows) * wire::BytesPerRow(result->format));
  if (result->format.dtype == wire::OutputDType::kInt8) result->scales.resize(rows);
}

void StoreRow(const Embeddings& out, int out_row, int row, EmbedResult* result) {
  if (result->format.sparse) {
    wire::SparseRow& dst = result->sparse_rows[static_cast<size_t>(row)];
    if (out.sparse()) {
      const int64_t begin = out.sparse_offsets[out_row], end = out.sparse_offsets[out_row + 1];
      dst.indices.assign(out.sparse_indices.begin() + begin, out.sparse_indices.begin() + end);
      dst.values.assign(out.sparse_values.begin() + begin, out.sparse_values.begin() + end);
    } else {
      dst = wire::SparseFromDense(reinterpret_cast<const char*>(out.row(out_row)), out.dim);
    }
    return;
  }
  float scale = 0;
  const size_t bpr = wire::BytesPerRow(result->format);
  auto* at = reinterpret_cast<uint8_t*>(result->data.data()) + row * bpr;
  if (out.sparse()) {  // a sparse model's rows asked for as dense float32 rows
    const std::vector<float> dense = out.DenseRow(out_row);
    wire::EncodeRow(dense.data(), result->format, at, &scale);
  } else {
    wire::EncodeRow(out.row(out_row), result->format, at, &scale);
  }
  if (!result->scales.empty()) result->scales[row] = scale;
}

void StoreRows(const Embeddings& out, int out_row, int row, int count, EmbedResult* result) {
  const wire::OutputFormat& f = result->format;
  if (!f.sparse && !out.sparse() && !f.normalize && f.dims == out.dim) {
    // Whole rows as they are (a multi-vector request's token vectors): one pass for all.
    auto* dst = reinterpret_cast<uint8_t*>(result->data.data()) +
                static_cast<size_t>(row) * wire::BytesPerRow(f);
    const size_t n = static_cast<size_t>(count) * out.dim;
    if (f.dtype == wire::OutputDType::kFloat32) {
      std::memcpy(dst, out.row(out_row), n * sizeof(float));
      return;
    }
    if (f.dtype == wire::OutputDType::kFloat16) {
      wire::FloatsToHalves(out.row(out_row), n, dst);
      return;
    }
  }
  for (int k = 0; k < count; ++k) StoreRow(out, out_row + k, row + k, result);
}

}  // namespace petal::server
