#include "bulk/dataset_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>

#include "bulk/dataset_child.h"

namespace petal::bulk {
namespace {

const char* const kSuffix[3] = {"", ".ids", ".scales"};

// Flushes, fsyncs and closes *f, then renames `from` to `to`.
Status CloseDurable(std::FILE** f, const std::string& from, const std::string& to) {
  const bool ok = std::fflush(*f) == 0 && fsync(fileno(*f)) == 0;
  std::fclose(*f);
  *f = nullptr;
  if (!ok) return Internal(from + ": flush failed (" + std::strerror(errno) + ")");
  std::error_code ec;
  std::filesystem::rename(from, to, ec);
  return ec ? Internal(to + ": " + ec.message()) : Status::Ok();
}

// Starts the kernel's writeback of `files` every kWritebackBytes of files[0] (without waiting
// for it), so that the fsync at their close has little left to do. *started: files[0]'s size at
// the last start.
constexpr long kWritebackBytes = 32 << 20;
void MaybeStartWriteback(std::FILE* const (&files)[3], long* started) {
  const long at = std::ftell(files[0]);
  if (at - *started < kWritebackBytes) return;
  for (auto* f : files) {
    if (f && std::fflush(f) == 0) sync_file_range(fileno(f), 0, 0, SYNC_FILE_RANGE_WRITE);
  }
  *started = at;
}

bool Put(const void* p, size_t size, size_t n, std::FILE* f) {
  return n == 0 || std::fwrite(p, size, n, f) == n;  // fwrite's buffer must not be null
}

// Parquet through the pyarrow helper. Frames are queued (up to kMaxQueued bytes) and written to
// the helper's stdin by one thread, so the caller never waits while pyarrow encodes a row group.
class ParquetSink final : public OutputSink {
 public:
  ParquetSink(int dim, ElemType type) : dim_(dim), type_(type) {}
  ~ParquetSink() override {
    Stop();
    const char q = 'Q';
    if (helper_.in() >= 0) (void)WriteAll(helper_.in(), &q, 1);
  }
  Status Start(const std::string& tmp, const std::string& final, const std::string& metadata) {
    PETAL_RETURN_IF_ERROR(
        helper_.Start({"write", std::to_string(dim_), ElemTypeName(type_)}, true));
    const std::string json = "{\"path\":" + JsonLiteral(tmp) + ",\"final\":" + JsonLiteral(final) +
                             ",\"metadata\":" + metadata + "}";
    std::string frame = "O";
    const uint32_t n = static_cast<uint32_t>(json.size());
    frame.append(reinterpret_cast<const char*>(&n), 4);
    frame += json;
    PETAL_RETURN_IF_ERROR(WriteAll(helper_.in(), frame.data(), frame.size()));
    thread_ = std::thread([this] { Loop(); });
    return Status::Ok();
  }
  Status Append(RowBlock rows) override {
    const uint64_t n = rows.ids.size();
    std::string f = "R";
    f.reserve(1 + 16 + 8 * (n + 1) + rows.data.size() + 4 * rows.scales.size() + 16 * n);
    f.append(reinterpret_cast<const char*>(&n), 8);
    int64_t off = 0;
    f.append(reinterpret_cast<const char*>(&off), 8);
    for (const auto& id : rows.ids) {
      off += static_cast<int64_t>(id.size());
      f.append(reinterpret_cast<const char*>(&off), 8);
    }
    const uint64_t len = static_cast<uint64_t>(off);
    f.append(reinterpret_cast<const char*>(&len), 8);
    for (const auto& id : rows.ids) f += id;
    f += rows.data;
    if (type_ == ElemType::kInt8) {
      f.append(reinterpret_cast<const char*>(rows.scales.data()), 4 * rows.scales.size());
    }
    return Enqueue(std::move(f));
  }
  Status Finish() override {
    PETAL_RETURN_IF_ERROR(Enqueue("C"));
    Stop();
    {
      std::lock_guard<std::mutex> lock(mu_);
      PETAL_RETURN_IF_ERROR(error_);
    }
    std::string line;
    PETAL_RETURN_IF_ERROR(helper_.ReadLine(&line));
    if (line != "ok") return Internal("the Parquet helper answered '" + line + "'");
    const char q = 'Q';
    PETAL_RETURN_IF_ERROR(WriteAll(helper_.in(), &q, 1));
    return helper_.Finish();
  }

 private:
  static constexpr size_t kMaxQueued = size_t{256} << 20;
  Status Enqueue(std::string frame) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !error_.ok() || queued_ < kMaxQueued || queue_.empty(); });
    PETAL_RETURN_IF_ERROR(error_);
    queued_ += frame.size();
    queue_.push_back(std::move(frame));
    cv_.notify_all();
    return Status::Ok();
  }
  void Loop() {
    for (;;) {
      std::string frame;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        frame = std::move(queue_.front());
        queue_.pop_front();
      }
      Status s = WriteAll(helper_.in(), frame.data(), frame.size());
      std::lock_guard<std::mutex> lock(mu_);
      queued_ -= frame.size();
      if (!s.ok() && error_.ok()) error_ = Internal("writing the Parquet output: " + s.message());
      cv_.notify_all();
    }
  }
  // Lets the thread write what is queued, then joins it.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  const int dim_;
  const ElemType type_;
  ChildProcess helper_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  size_t queued_ = 0;
  bool stop_ = false;
  Status error_;
};

// .npy with a fixed-size header rewritten at the end with the row count, ids as JSON Lines.
class NpySink final : public OutputSink {
 public:
  NpySink(int dim, ElemType type) : dim_(dim), type_(type) {}
  ~NpySink() override {
    for (auto* f : files_) {
      if (f) std::fclose(f);
    }
  }
  Status Start(const std::string& tmp_dir, const std::string& output) {
    const std::string stem = output.substr(0, output.size() - 4);
    finals_[0] = output;
    finals_[1] = stem + ".ids.jsonl";
    finals_[2] = stem + ".scales.npy";
    const int n = type_ == ElemType::kInt8 ? 3 : 2;
    for (int i = 0; i < n; ++i) {
      tmps_[i] = tmp_dir + "/output" + kSuffix[i] + ".tmp";
      files_[i] = std::fopen(tmps_[i].c_str(), "wb");
      if (!files_[i]) return Internal(tmps_[i] + ": " + std::strerror(errno));
    }
    return Headers();
  }
  Status Append(RowBlock rows) override {
    std::string lines;
    for (const auto& id : rows.ids) lines += JsonLiteral(id) + "\n";
    if (!Put(rows.data.data(), 1, rows.data.size(), files_[0]) ||
        !Put(lines.data(), 1, lines.size(), files_[1]) ||
        (files_[2] && !Put(rows.scales.data(), 4, rows.scales.size(), files_[2]))) {
      return Internal(finals_[0] + ": write failed (" + std::strerror(errno) + ")");
    }
    rows_ += static_cast<int64_t>(rows.ids.size());
    MaybeStartWriteback(files_, &started_);
    return Status::Ok();
  }
  Status Finish() override {
    PETAL_RETURN_IF_ERROR(Headers());
    for (int i = 0; i < 3; ++i) {
      if (files_[i]) PETAL_RETURN_IF_ERROR(CloseDurable(&files_[i], tmps_[i], finals_[i]));
    }
    return Status::Ok();
  }

 private:
  // (Re)writes the 128-byte .npy headers for rows_ rows, leaving the file position at the end.
  Status Headers() {
    const char* descr = type_ == ElemType::kFloat32   ? "<f4"
                        : type_ == ElemType::kFloat16 ? "<f2"
                                                      : "|i1";
    for (int i : {0, 2}) {
      if (!files_[i]) continue;
      std::string h = std::string("{'descr': '") + (i == 0 ? descr : "<f4") +
                      "', 'fortran_order': False, 'shape': (" + std::to_string(rows_) +
                      (i == 0 ? ", " + std::to_string(dim_) + "), }" : ",), }");
      h.resize(117, ' ');
      h += '\n';
      const uint16_t hl = static_cast<uint16_t>(h.size());
      std::string head("\x93NUMPY\x01\x00", 8);
      head.append(reinterpret_cast<const char*>(&hl), 2);
      head += h;
      const long end = std::ftell(files_[i]);
      if (std::fseek(files_[i], 0, SEEK_SET) != 0 || !Put(head.data(), 1, head.size(), files_[i]) ||
          std::fseek(files_[i], std::max<long>(end, 128), SEEK_SET) != 0) {
        return Internal(tmps_[i] + ": header write failed");
      }
    }
    return Status::Ok();
  }

  const int dim_;
  const ElemType type_;
  int64_t rows_ = 0;
  long started_ = 0;  // file offset up to which writeback was started
  std::string tmps_[3], finals_[3];
  std::FILE* files_[3] = {nullptr, nullptr, nullptr};
};

}  // namespace

PartFile::~PartFile() {
  for (auto* f : files_) {
    if (f) std::fclose(f);
  }
}

std::string PartFile::Name(int i) {
  char name[32];
  std::snprintf(name, sizeof(name), "part-%06d.bin", i);
  return name;
}

Status PartFile::Open(const std::string& path) {
  path_ = path;
  const int n = type_ == ElemType::kInt8 ? 3 : 2;
  for (int i = 0; i < n; ++i) {
    const std::string p = path + kSuffix[i] + ".tmp";
    files_[i] = std::fopen(p.c_str(), "wb");
    if (!files_[i]) return Internal(p + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Status PartFile::Write(const RowBlock& rows) {
  std::string ids;
  for (const auto& id : rows.ids) {
    const uint32_t n = static_cast<uint32_t>(id.size());
    ids.append(reinterpret_cast<const char*>(&n), 4);
    ids += id;
  }
  if (!Put(rows.data.data(), 1, rows.data.size(), files_[0]) ||
      !Put(ids.data(), 1, ids.size(), files_[1]) ||
      (files_[2] && !Put(rows.scales.data(), 4, rows.scales.size(), files_[2]))) {
    return Internal(path_ + ": write failed (" + std::strerror(errno) + ")");
  }
  // The last part is made durable on the critical path, at the end of the run.
  MaybeStartWriteback(files_, &started_);
  return Status::Ok();
}

Status PartFile::Close() {
  for (int i = 0; i < 3; ++i) {
    if (!files_[i]) continue;
    const std::string p = path_ + kSuffix[i];
    PETAL_RETURN_IF_ERROR(CloseDurable(&files_[i], p + ".tmp", p));
  }
  return Status::Ok();
}

Status PartFile::ForEachBlock(const std::string& path, int dim, ElemType type, size_t block_rows,
                              const std::function<Status(RowBlock)>& fn) {
  std::FILE* f[3] = {nullptr, nullptr, nullptr};
  struct Closer {
    std::FILE** f;
    ~Closer() {
      for (int i = 0; i < 3; ++i) {
        if (f[i]) std::fclose(f[i]);
      }
    }
  } closer{f};
  for (int i = 0; i < (type == ElemType::kInt8 ? 3 : 2); ++i) {
    f[i] = std::fopen((path + kSuffix[i]).c_str(), "rb");
    if (!f[i]) return DataLoss(path + kSuffix[i] + ": " + std::strerror(errno));
  }
  const size_t row_bytes = static_cast<size_t>(dim) * ElemBytes(type);
  for (;;) {
    RowBlock b;
    uint32_t n;
    while (b.ids.size() < block_rows && std::fread(&n, 4, 1, f[1]) == 1) {
      std::string id(n, '\0');
      if (n && std::fread(id.data(), 1, n, f[1]) != n) return DataLoss(path + ".ids is truncated");
      b.ids.push_back(std::move(id));
    }
    if (b.ids.empty()) break;
    b.data.resize(b.ids.size() * row_bytes);
    b.scales.resize(f[2] ? b.ids.size() : 0);
    if (std::fread(b.data.data(), 1, b.data.size(), f[0]) != b.data.size() ||
        (f[2] && std::fread(b.scales.data(), 4, b.scales.size(), f[2]) != b.scales.size())) {
      return DataLoss(path + " has fewer rows than ids");
    }
    PETAL_RETURN_IF_ERROR(fn(std::move(b)));
  }
  if (std::fgetc(f[0]) != EOF) return DataLoss(path + " has more rows than ids");
  return Status::Ok();
}

StatusOr<std::unique_ptr<OutputSink>> OpenOutputSink(DatasetFormat format,
                                                     const std::string& output,
                                                     const std::string& tmp_dir, int dim,
                                                     ElemType type, const std::string& metadata) {
  if (format == DatasetFormat::kParquet) {
    auto s = std::make_unique<ParquetSink>(dim, type);
    PETAL_RETURN_IF_ERROR(s->Start(tmp_dir + "/output.parquet.tmp", output, metadata));
    return std::unique_ptr<OutputSink>(std::move(s));
  }
  if (format == DatasetFormat::kNpy) {
    auto s = std::make_unique<NpySink>(dim, type);
    PETAL_RETURN_IF_ERROR(s->Start(tmp_dir, output));
    return std::unique_ptr<OutputSink>(std::move(s));
  }
  return InvalidArgument("--output must be .parquet or .npy");
}

}  // namespace petal::bulk
