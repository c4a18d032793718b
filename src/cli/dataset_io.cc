#include "cli/dataset_io.h"

#include <fcntl.h>
#include <signal.h>
#include <simdjson.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "dataset_arrow.h"  // generated: kDatasetArrowPy, the helper's source

extern char** environ;

namespace petal::cli {
namespace {

bool EndsWith(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

Status WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Internal(std::string("write: ") + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

// Reads exactly n bytes; false at a clean end of stream before the first byte.
StatusOr<bool> ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < n) {
    const ssize_t r = read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Internal(std::string("read: ") + std::strerror(errno));
    if (r == 0) {
      if (got == 0) return false;
      return DataLoss("the Parquet helper's stream ended mid-frame");
    }
    got += static_cast<size_t>(r);
  }
  return true;
}

// The Parquet helper as a child process with its stdin and/or stdout piped to us.
class Helper {
 public:
  ~Helper() {
    if (in_ >= 0) close(in_);
    if (out_ >= 0) close(out_);
    if (pid_ > 0) {
      int st;
      waitpid(pid_, &st, 0);
    }
  }
  Status Start(const std::vector<std::string>& args, bool pipe_in) {
    std::vector<std::string> argv = {PythonExe(), "-c", kDatasetArrowPy};
    argv.insert(argv.end(), args.begin(), args.end());
    int to_child[2] = {-1, -1}, from_child[2];
    if (pipe(from_child) != 0 || (pipe_in && pipe(to_child) != 0)) {
      return Internal("pipe failed");
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, from_child[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, from_child[0]);
    if (pipe_in) {
      posix_spawn_file_actions_adddup2(&fa, to_child[0], STDIN_FILENO);
      posix_spawn_file_actions_addclose(&fa, to_child[1]);
    }
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    const int rc = posix_spawnp(&pid_, argv[0].c_str(), &fa, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(from_child[1]);
    out_ = from_child[0];
    if (pipe_in) {
      close(to_child[0]);
      in_ = to_child[1];
    }
    if (rc != 0) {
      pid_ = -1;
      return FailedPrecondition("cannot run " + argv[0] + " for Parquet (set PETAL_PYTHON to " +
                                "a Python with pyarrow): " + std::strerror(rc));
    }
    return Status::Ok();
  }
  // Waits for exit: an error naming the helper if it failed.
  Status Finish() {
    if (in_ >= 0) close(in_);
    in_ = -1;
    int st = 0;
    if (pid_ > 0 && waitpid(pid_, &st, 0) == pid_) {
      pid_ = -1;
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        return Internal("the Parquet helper (" + PythonExe() + " with pyarrow) failed; see above");
      }
    }
    pid_ = -1;
    return Status::Ok();
  }
  Status ReadLine(std::string* line) {
    line->clear();
    char c;
    for (;;) {
      PETAL_ASSIGN_OR_RETURN(bool more, ReadAll(out_, &c, 1));
      if (!more) {
        Status st = Finish();
        return st.ok() ? DataLoss("the Parquet helper stopped") : st;
      }
      if (c == '\n') return Status::Ok();
      line->push_back(c);
    }
  }
  int in() const { return in_; }
  int out() const { return out_; }

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
};

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
  Helper helper_;
  int64_t next_row_;
};

class ParquetWriter final : public PartWriter {
 public:
  ParquetWriter(int dim, ElemType t) : dim_(dim), type_(t) {}
  Status Start() {
    return helper_.Start({"write", std::to_string(dim_), ElemTypeName(type_)}, true);
  }
  Status Open(const std::string& path, const std::string& metadata) override {
    return Command('O', "{\"path\":" + JsonQuote(path) + ",\"metadata\":" + metadata + "}");
  }
  Status Write(const std::vector<std::string>& ids, const std::string& data,
               const std::vector<float>& scales) override {
    const uint64_t n = ids.size();
    std::string buf = "R";
    buf.append(reinterpret_cast<const char*>(&n), 8);
    int64_t off = 0;
    buf.append(reinterpret_cast<const char*>(&off), 8);
    for (const auto& id : ids) {
      off += static_cast<int64_t>(id.size());
      buf.append(reinterpret_cast<const char*>(&off), 8);
    }
    const uint64_t len = static_cast<uint64_t>(off);
    buf.append(reinterpret_cast<const char*>(&len), 8);
    for (const auto& id : ids) buf += id;
    PETAL_RETURN_IF_ERROR(WriteAll(helper_.in(), buf.data(), buf.size()));
    PETAL_RETURN_IF_ERROR(WriteAll(helper_.in(), data.data(), data.size()));
    if (type_ == ElemType::kInt8) {
      PETAL_RETURN_IF_ERROR(WriteAll(helper_.in(), scales.data(), scales.size() * 4));
    }
    return Status::Ok();
  }
  Status Close() override { return Ack('C', ""); }
  Status Merge(const std::vector<std::string>& parts, const std::string& output,
               const std::string& metadata) override {
    std::string list = "[";
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i) list += ',';
      list += JsonQuote(parts[i]);
    }
    list += "]";
    return Ack('M', "{\"parts\":" + list + ",\"output\":" + JsonQuote(output) +
                        ",\"metadata\":" + metadata + "}");
  }
  std::string PartName(int i) const override {
    char name[32];
    std::snprintf(name, sizeof(name), "part-%06d.parquet", i);
    return name;
  }
  ~ParquetWriter() override {
    const char q = 'Q';
    (void)WriteAll(helper_.in(), &q, 1);
  }

 private:
  Status Command(char op, const std::string& json) {
    std::string buf(1, op);
    if (op != 'C') {
      const uint32_t n = static_cast<uint32_t>(json.size());
      buf.append(reinterpret_cast<const char*>(&n), 4);
      buf += json;
    }
    return WriteAll(helper_.in(), buf.data(), buf.size());
  }
  Status Ack(char op, const std::string& json) {
    PETAL_RETURN_IF_ERROR(Command(op, json));
    std::string line;
    PETAL_RETURN_IF_ERROR(helper_.ReadLine(&line));
    if (line != "ok") return Internal("the Parquet helper answered '" + line + "'");
    return Status::Ok();
  }
  int dim_;
  ElemType type_;
  Helper helper_;
};

// .npy parts: PART (raw rows), PART.ids (JSON Lines of ids), PART.scales (int8 only).
class NpyWriter final : public PartWriter {
 public:
  NpyWriter(int dim, ElemType t) : dim_(dim), type_(t) {}
  Status Open(const std::string& path, const std::string&) override {
    path_ = path;
    for (auto& [f, suffix] : {std::pair{&rows_, ""}, {&ids_, ".ids"}, {&scales_, ".scales"}}) {
      *f = std::fopen((path + suffix + ".tmp").c_str(), "wb");
      if (!*f) return Internal(path + suffix + ".tmp: " + std::strerror(errno));
    }
    return Status::Ok();
  }
  Status Write(const std::vector<std::string>& ids, const std::string& data,
               const std::vector<float>& scales) override {
    std::string lines;
    for (const auto& id : ids) lines += JsonQuote(id) + "\n";
    // fwrite's buffer must not be null even for 0 items (an empty vector's data(): UBSan).
    auto put = [](const void* p, size_t size, size_t n, FILE* f) {
      return n == 0 || std::fwrite(p, size, n, f) == n;
    };
    if (!put(data.data(), 1, data.size(), rows_) || !put(lines.data(), 1, lines.size(), ids_) ||
        !put(scales.data(), 4, scales.size(), scales_)) {
      return Internal(path_ + ": write failed");
    }
    return Status::Ok();
  }
  Status Close() override {
    for (auto& [f, suffix] : {std::pair{&rows_, ""}, {&ids_, ".ids"}, {&scales_, ".scales"}}) {
      const bool ok = std::fflush(*f) == 0 && fsync(fileno(*f)) == 0;
      std::fclose(*f);
      *f = nullptr;
      if (!ok) return Internal(path_ + suffix + ": flush failed");
      std::error_code ec;
      std::filesystem::rename(path_ + suffix + ".tmp", path_ + suffix, ec);
      if (ec) return Internal(path_ + suffix + ": " + ec.message());
    }
    return Status::Ok();
  }
  Status Merge(const std::vector<std::string>& parts, const std::string& output,
               const std::string&) override {
    int64_t bytes = 0;
    for (const auto& p : parts) bytes += static_cast<int64_t>(std::filesystem::file_size(p));
    const int64_t rows = bytes / (static_cast<int64_t>(dim_) * ElemBytes(type_));
    const std::string stem = output.substr(0, output.size() - 4);
    const char* descr = type_ == ElemType::kFloat32   ? "<f4"
                        : type_ == ElemType::kFloat16 ? "<f2"
                                                      : "|i1";
    PETAL_RETURN_IF_ERROR(Concat(parts, "", output, descr, rows, dim_));
    PETAL_RETURN_IF_ERROR(Concat(parts, ".ids", stem + ".ids.jsonl", nullptr, 0, 0));
    if (type_ == ElemType::kInt8) {
      PETAL_RETURN_IF_ERROR(Concat(parts, ".scales", stem + ".scales.npy", "<f4", rows, 0));
    }
    return Status::Ok();
  }
  std::string PartName(int i) const override {
    char name[32];
    std::snprintf(name, sizeof(name), "part-%06d.bin", i);
    return name;
  }
  ~NpyWriter() override {
    for (auto* f : {rows_, ids_, scales_}) {
      if (f) std::fclose(f);
    }
  }

 private:
  // Writes `out` (through a .tmp and a rename) as an .npy header (if `descr`) plus every part's
  // `suffix` file. dim 0: a 1-D array.
  static Status Concat(const std::vector<std::string>& parts, const char* suffix,
                       const std::string& out, const char* descr, int64_t rows, int dim) {
    std::FILE* o = std::fopen((out + ".tmp").c_str(), "wb");
    if (!o) return Internal(out + ".tmp: " + std::strerror(errno));
    if (descr) {
      std::string h = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" +
                      std::to_string(rows) + (dim ? ", " + std::to_string(dim) + "), }" : ",), }");
      while ((10 + h.size() + 1) % 64 != 0) h += ' ';
      h += '\n';
      const uint16_t hl = static_cast<uint16_t>(h.size());
      std::fwrite("\x93NUMPY\x01\x00", 1, 8, o);
      std::fwrite(&hl, 2, 1, o);
      std::fwrite(h.data(), 1, h.size(), o);
    }
    std::vector<char> buf(1 << 20);
    for (const auto& p : parts) {
      std::FILE* in = std::fopen((p + suffix).c_str(), "rb");
      if (!in) {
        std::fclose(o);
        return Internal(p + suffix + ": " + std::strerror(errno));
      }
      size_t n;
      while ((n = std::fread(buf.data(), 1, buf.size(), in)) > 0) std::fwrite(buf.data(), 1, n, o);
      std::fclose(in);
    }
    const bool ok = std::fflush(o) == 0 && fsync(fileno(o)) == 0;
    std::fclose(o);
    if (!ok) return Internal(out + ": write failed");
    std::error_code ec;
    std::filesystem::rename(out + ".tmp", out, ec);
    return ec ? Internal(out + ": " + ec.message()) : Status::Ok();
  }

  int dim_;
  ElemType type_;
  std::string path_;
  std::FILE* rows_ = nullptr;
  std::FILE* ids_ = nullptr;
  std::FILE* scales_ = nullptr;
};

}  // namespace

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

std::string JsonQuote(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\u%04x", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

StatusOr<int64_t> CountRows(const std::string& path, DatasetFormat format) {
  if (format == DatasetFormat::kParquet) {
    Helper h;
    PETAL_RETURN_IF_ERROR(h.Start({"count", path}, false));
    std::string line;
    PETAL_RETURN_IF_ERROR(h.ReadLine(&line));
    PETAL_RETURN_IF_ERROR(h.Finish());
    return std::stoll(line);
  }
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

StatusOr<std::unique_ptr<PartWriter>> OpenPartWriter(DatasetFormat format, int dim, ElemType type) {
  if (format == DatasetFormat::kParquet) {
    auto w = std::make_unique<ParquetWriter>(dim, type);
    PETAL_RETURN_IF_ERROR(w->Start());
    return std::unique_ptr<PartWriter>(std::move(w));
  }
  if (format == DatasetFormat::kNpy) return std::unique_ptr<PartWriter>(new NpyWriter(dim, type));
  return InvalidArgument("--output must be .parquet or .npy");
}

}  // namespace petal::cli
