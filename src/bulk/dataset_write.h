// Output of `petal embed --input/--output`: rows leave in input order through two writers.
//  - PartFile: one resumable part, raw (PATH: rows of dim elements, PATH.ids: u32 length + bytes
//    per id, PATH.scales: float32 per row for int8), made durable under its final name by Close.
//    Parts exist only so that --resume can rebuild the output; they are read back in blocks.
//  - OutputSink: the output file itself, written once as rows arrive (Parquet through the
//    pyarrow helper, .npy natively), durable and renamed into place by Finish. A run that is
//    killed leaves only the temporary file, which the resumed run replaces by replaying parts.
// Thread-safety: each object belongs to one thread (the sink's own writer thread is internal).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bulk/dataset_io.h"
#include "common/status.h"

namespace petal::bulk {

// Rows of one batch: ids, ids.size() * dim elements, and (int8) one scale per row.
struct RowBlock {
  std::vector<std::string> ids;
  std::string data;
  std::vector<float> scales;
};

class PartFile {
 public:
  PartFile(int dim, ElemType type) : dim_(dim), type_(type) {}
  ~PartFile();
  // The part file name for index `i` (without folder).
  static std::string Name(int i);
  Status Open(const std::string& path);
  Status Write(const RowBlock& rows);
  // Flushes, fsyncs and renames the part's files into place.
  Status Close();
  // Reads the finished part at `path` back, calling `fn` for blocks of at most `block_rows`.
  static Status ForEachBlock(const std::string& path, int dim, ElemType type, size_t block_rows,
                             const std::function<Status(RowBlock)>& fn);

 private:
  const int dim_;
  const ElemType type_;
  std::string path_;
  std::FILE* files_[3] = {nullptr, nullptr, nullptr};  // rows, ids, scales
  long started_ = 0;                                   // rows file size at the last writeback start
};

class OutputSink {
 public:
  virtual ~OutputSink() = default;
  // Appends rows (in order). May queue them; an error of earlier rows is returned here or by
  // Finish.
  virtual Status Append(RowBlock rows) = 0;
  // Writes everything, makes it durable and renames it to the output name(s).
  virtual Status Finish() = 0;
};

// `output` is .parquet or .npy (then also OUTPUT's stem + ".ids.jsonl" and, for int8,
// ".scales.npy"); temporary files go under `tmp_dir` (same file system). `metadata` is a JSON
// object stored in the Parquet file metadata.
StatusOr<std::unique_ptr<OutputSink>> OpenOutputSink(DatasetFormat format,
                                                     const std::string& output,
                                                     const std::string& tmp_dir, int dim,
                                                     ElemType type, const std::string& metadata);

}  // namespace petal::bulk
