#include "bulk/dataset_io.h"

#include <simdjson.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "bulk/dataset_child.h"
#include "bulk/parquet_footer.h"

namespace petal::bulk {
namespace {

bool EndsWith(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

class JsonlReader final : public RowReader {
 public:
  JsonlReader(const ReaderOptions& o, int64_t start, int64_t stop)
      : opts_(o), next_row_(0), start_(start), stop_(stop) {}
  Status Open(const std::string& path) {
    f_ = std::fopen(path.c_str(), "rb");
    if (!f_) return NotFound(path + ": " + std::strerror(errno));
    return Status::Ok();
  }
  ~JsonlReader() override {
    if (f_) std::fclose(f_);
    std::free(buf_);
  }
  StatusOr<bool> Next(std::vector<InputRow>* rows) override {
    rows->clear();
    while (next_row_ < stop_ && rows->size() < opts_.batch_rows) {
      if (!NextLine()) break;
      const int64_t row = next_row_++;
      if (row < start_) continue;
      rows->push_back(Parse(row));
    }
    return !rows->empty();
  }

 private:
  // The next non-blank line into line_; false at end of file.
  bool NextLine() {
    for (;;) {
      const ssize_t n = getline(&buf_, &cap_, f_);
      if (n < 0) return false;
      line_.assign(buf_, static_cast<size_t>(n));
      if (!line_.empty() && line_.back() == '\n') line_.pop_back();
      if (line_.find_first_not_of(" \t\r") != std::string::npos) return true;
    }
  }
  InputRow Parse(int64_t row) {
    InputRow r;
    r.row = row;
    r.id = "row " + std::to_string(row);
    simdjson::dom::object obj;
    if (parser_.parse(line_).get_object().get(obj) != simdjson::SUCCESS) {
      r.error = "not a JSON object";
      return r;
    }
    if (opts_.id_field.empty()) {
      r.id = std::to_string(row);
    } else {
      simdjson::dom::element id;
      std::string_view sv;
      int64_t n;
      if (obj[opts_.id_field].get(id) != simdjson::SUCCESS || id.is_null()) {
        r.error = "no '" + opts_.id_field + "' (--id-field)";
        return r;
      }
      if (id.get_string().get(sv) == simdjson::SUCCESS) {
        r.id.assign(sv);
      } else if (id.get_int64().get(n) == simdjson::SUCCESS) {
        r.id = std::to_string(n);
      } else {
        r.error = "'" + opts_.id_field + "' is neither a string nor an integer";
        return r;
      }
    }
    simdjson::dom::element text;
    std::string_view sv;
    if (obj[opts_.text_field].get(text) != simdjson::SUCCESS) {
      r.error = "no '" + opts_.text_field + "' (--text-field)";
    } else if (text.is_null()) {
      r.error = "'" + opts_.text_field + "' is null";
    } else if (text.get_string().get(sv) != simdjson::SUCCESS) {
      r.error = "'" + opts_.text_field + "' is not a string";
    } else {
      r.text.assign(sv);
    }
    return r;
  }

  ReaderOptions opts_;
  std::FILE* f_ = nullptr;
  std::string line_;
  char* buf_ = nullptr;  // getline's
  size_t cap_ = 0;
  simdjson::dom::parser parser_;
  int64_t next_row_, start_, stop_;
};

class ParquetReader final : public RowReader {
 public:
  ParquetReader(const ReaderOptions& o, int64_t start) : opts_(o), next_row_(start) {}
  Status Open(const std::string& path, int64_t start, int64_t stop) {
    return helper_.Start({"read", path, opts_.text_field, opts_.id_field, std::to_string(start),
                          std::to_string(stop), std::to_string(opts_.batch_rows)},
                         false);
  }
  StatusOr<bool> Next(std::vector<InputRow>* rows) override {
    rows->clear();
    uint64_t n = 0;
    PETAL_ASSIGN_OR_RETURN(bool more, ReadAll(helper_.out(), &n, 8));
    if (!more) {
      Status st = helper_.Finish();
      return st.ok() ? DataLoss("the Parquet helper stopped early") : st;
    }
    if (n == 0) {
      PETAL_RETURN_IF_ERROR(helper_.Finish());
      return false;
    }
    std::vector<uint8_t> id_null(n), text_null(n);
    PETAL_RETURN_IF_ERROR(ReadAll(helper_.out(), id_null.data(), n).status());
    PETAL_RETURN_IF_ERROR(ReadAll(helper_.out(), text_null.data(), n).status());
    std::vector<int64_t> id_offs(n + 1), text_offs(n + 1);
    std::string ids, texts;
    for (auto [offs, data] : {std::pair{&id_offs, &ids}, std::pair{&text_offs, &texts}}) {
      PETAL_RETURN_IF_ERROR(ReadAll(helper_.out(), offs->data(), 8 * (n + 1)).status());
      uint64_t len = 0;
      PETAL_RETURN_IF_ERROR(ReadAll(helper_.out(), &len, 8).status());
      data->resize(len);
      if (len) PETAL_RETURN_IF_ERROR(ReadAll(helper_.out(), data->data(), len).status());
    }
    rows->resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      InputRow& r = (*rows)[i];
      r.row = next_row_++;
      if (id_null[i]) {
        r.id = "row " + std::to_string(r.row);
        r.error = "'" + opts_.id_field + "' is null";
        continue;
      }
      r.id.assign(ids, id_offs[i], id_offs[i + 1] - id_offs[i]);
      if (text_null[i]) {
        r.error = "'" + opts_.text_field + "' is null";
      } else {
        r.text.assign(texts, text_offs[i], text_offs[i + 1] - text_offs[i]);
      }
    }
    return true;
  }

 private:
  ReaderOptions opts_;
  ChildProcess helper_;
  int64_t next_row_;
};

class PrefetchReader final : public RowReader {
 public:
  PrefetchReader(std::unique_ptr<RowReader> r, size_t depth)
      : reader_(std::move(r)), depth_(std::max<size_t>(1, depth)), thread_([this] { Loop(); }) {}
  ~PrefetchReader() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  StatusOr<bool> Next(std::vector<InputRow>* rows) override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !queue_.empty() || done_; });
    if (queue_.empty()) {
      rows->clear();
      if (!status_.ok()) return status_;
      return false;
    }
    *rows = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    return true;
  }

 private:
  void Loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || queue_.size() < depth_; });
        if (stop_) break;
      }
      std::vector<InputRow> rows;
      auto more = reader_->Next(&rows);
      std::lock_guard<std::mutex> lock(mu_);
      if (!more.ok() || !*more) {
        if (!more.ok()) status_ = more.status();
        break;
      }
      queue_.push_back(std::move(rows));
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    cv_.notify_all();
  }

  std::unique_ptr<RowReader> reader_;
  const size_t depth_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<InputRow>> queue_;
  bool stop_ = false, done_ = false;
  Status status_;
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace

std::unique_ptr<RowReader> Prefetch(std::unique_ptr<RowReader> reader, size_t depth) {
  return std::make_unique<PrefetchReader>(std::move(reader), depth);
}

StatusOr<DatasetFormat> FormatOf(const std::string& path) {
  if (EndsWith(path, ".jsonl") || EndsWith(path, ".ndjson") || EndsWith(path, ".json")) {
    return DatasetFormat::kJsonl;
  }
  if (EndsWith(path, ".parquet") || EndsWith(path, ".pq")) return DatasetFormat::kParquet;
  if (EndsWith(path, ".npy")) return DatasetFormat::kNpy;
  return InvalidArgument(path + ": unknown format (.jsonl, .parquet or .npy)");
}

std::string PythonExe() {
  const char* p = std::getenv("PETAL_PYTHON");
  if (p && *p) return p;
#ifdef PETAL_SOURCE_VENV_PYTHON
  // A build tree's binary finds the checkout's .venv (scripts/setup.sh installs pyarrow there).
  if (access(PETAL_SOURCE_VENV_PYTHON, X_OK) == 0) return PETAL_SOURCE_VENV_PYTHON;
#endif
  return "python3";
}

const char* ElemTypeName(ElemType t) {
  return t == ElemType::kFloat32 ? "float32" : t == ElemType::kFloat16 ? "float16" : "int8";
}

int ElemBytes(ElemType t) { return t == ElemType::kFloat32 ? 4 : t == ElemType::kFloat16 ? 2 : 1; }

StatusOr<int64_t> CountRows(const std::string& path, DatasetFormat format) {
  // From the footer, in C++: a Python start-up here would delay everything behind it.
  if (format == DatasetFormat::kParquet) return ParquetRowCount(path);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return NotFound(path + ": " + std::strerror(errno));
  int64_t rows = 0;
  bool content = false;
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    for (size_t i = 0; i < n; ++i) {
      const char c = buf[i];
      if (c == '\n') {
        rows += content;
        content = false;
      } else if (c != ' ' && c != '\t' && c != '\r') {
        content = true;
      }
    }
  }
  std::fclose(f);
  return rows + content;
}

StatusOr<std::unique_ptr<RowReader>> OpenReader(const std::string& path, DatasetFormat format,
                                                const ReaderOptions& options, int64_t start,
                                                int64_t stop) {
  if (format == DatasetFormat::kParquet) {
    auto r = std::make_unique<ParquetReader>(options, start);
    PETAL_RETURN_IF_ERROR(r->Open(path, start, stop));
    return std::unique_ptr<RowReader>(std::move(r));
  }
  auto r = std::make_unique<JsonlReader>(options, start, stop);
  PETAL_RETURN_IF_ERROR(r->Open(path));
  return std::unique_ptr<RowReader>(std::move(r));
}

}  // namespace petal::bulk
