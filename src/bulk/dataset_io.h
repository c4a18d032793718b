// Dataset input for `petal embed --input/--output`: row readers (JSON Lines natively, Parquet
// through the embedded pyarrow helper dataset_arrow.py run as a child process), row counts and
// the output element types. Every reader streams: at most one batch of rows is in memory.
// dataset_write.h has the writers. Thread-safety: each object belongs to one thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/json_literal.h"
#include "common/status.h"

namespace petal::bulk {

enum class DatasetFormat { kJsonl, kParquet, kNpy };

// From the file name's extension: .jsonl/.ndjson/.json, .parquet/.pq, .npy.
StatusOr<DatasetFormat> FormatOf(const std::string& path);

// The interpreter that runs the Parquet helper: $PETAL_PYTHON, else the source checkout's
// .venv/bin/python if this binary was built there and it exists, else python3.
std::string PythonExe();

// One input row. A bad row (missing or null text, bad id) has `error` set; its id is then the
// best name for it (the id if readable, else "row N").
struct InputRow {
  int64_t row = 0;  // position in the input file
  std::string id;
  std::string text;
  std::string error;
};

struct ReaderOptions {
  std::string text_field = "text";
  std::string id_field = "id";  // "" = the row number is the id
  size_t batch_rows = 1024;
};

class RowReader {
 public:
  virtual ~RowReader() = default;
  // Replaces *rows by the next rows (at most batch_rows); false at the end of the range.
  virtual StatusOr<bool> Next(std::vector<InputRow>* rows) = 0;
};

// Rows in the file (JSONL: lines that are not blank; Parquet: its metadata).
StatusOr<int64_t> CountRows(const std::string& path, DatasetFormat format);
// Reads rows [start, stop) of `path`.
StatusOr<std::unique_ptr<RowReader>> OpenReader(const std::string& path, DatasetFormat format,
                                                const ReaderOptions& options, int64_t start,
                                                int64_t stop);

// Runs `reader` on a thread of its own, up to `depth` batches ahead of the caller.
std::unique_ptr<RowReader> Prefetch(std::unique_ptr<RowReader> reader, size_t depth);

// Output element type of the embedding column.
enum class ElemType { kFloat32, kFloat16, kInt8 };
const char* ElemTypeName(ElemType t);
int ElemBytes(ElemType t);
// JsonLiteral (the JSON string literals of manifests and metadata): common/json_literal.h.

}  // namespace petal::bulk
