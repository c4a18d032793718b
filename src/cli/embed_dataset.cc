#include "cli/embed_dataset.h"

#include <signal.h>
#include <simdjson.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "cli/dataset_io.h"
#include "common/file_util.h"
#include "gateway/chunker.h"
#include "gateway/embed_format.h"
#include "gateway/replica_set.h"
#include "model/config.h"
#include "tokenizer/prompts.h"
#include "tokenizer/tokenizer.h"
#include "wire/codec.h"

namespace petal::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Seqs = std::vector<std::vector<int32_t>>;

// Encoded rows (BytesPerRow each) and, for int8, their scales.
struct Encoded {
  std::string data;
  std::vector<float> scales;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Embeds `seqs` into rows of the output format; safe to call from many threads.
  virtual StatusOr<Encoded> Embed(const Seqs& seqs) = 0;
};

// One thread per engine: it creates the engine (so a CUDA engine is bound to that thread's
// device) and runs every call on it, two batches deep.
class LocalBackend final : public Backend {
 public:
  LocalBackend(const DatasetOptions& o, wire::OutputFormat f) : opts_(o), format_(f) {}
  ~LocalBackend() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  // Starts one engine per device and waits until each has loaded (its config in *config).
  Status Start(ModelConfig* config) {
    std::vector<int> devices = opts_.devices;
    if (devices.empty()) devices.push_back(opts_.engine.cuda.device);
    std::vector<std::promise<StatusOr<ModelConfig>>> ready(devices.size());
    for (size_t i = 0; i < devices.size(); ++i) {
      threads_.emplace_back([this, d = devices[i], p = &ready[i]] { Worker(d, p); });
    }
    for (auto& r : ready) {
      auto c = r.get_future().get();
      if (!c.ok()) return c.status();
      *config = *c;
    }
    return Status::Ok();
  }
  StatusOr<Encoded> Embed(const Seqs& seqs) override {
    Job job{&seqs, {}};
    auto f = job.result.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(&job);
    }
    cv_.notify_one();
    return f.get();
  }

 private:
  struct Job {
    const Seqs* seqs;
    std::promise<StatusOr<Encoded>> result;
  };
  void Worker(int device, std::promise<StatusOr<ModelConfig>>* ready) {
    EngineOptions eo = opts_.engine;
    eo.cuda.device = device;
    eo.cuda.max_tokens = std::max(eo.cuda.max_tokens, opts_.max_batch_tokens);
    auto engine = CreateEngine(opts_.model_dir, eo);
    if (!engine.ok()) return ready->set_value(engine.status());
    ready->set_value((*engine)->config());
    const int max_seqs = std::max(1, eo.cuda.max_seqs);
    for (;;) {
      Job* job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = jobs_.front();
        jobs_.pop_front();
      }
      job->result.set_value(Run(**engine, *job->seqs, max_seqs));
    }
  }
  StatusOr<Encoded> Run(Engine& engine, const Seqs& seqs, int max_seqs) {
    // Sub-batches within the token budget; batch k+1 is enqueued before batch k is waited on.
    std::vector<Batch> batches;
    for (const auto& s : seqs) {
      if (batches.empty() || batches.back().num_seqs() >= max_seqs ||
          (batches.back().num_tokens() > 0 &&
           batches.back().num_tokens() + static_cast<int>(s.size()) > opts_.max_batch_tokens)) {
        batches.emplace_back();
        batches.back().cu_seqlens.push_back(0);
      }
      batches.back().Add(s);
    }
    Encoded out;
    const size_t row_bytes = wire::BytesPerRow(format_);
    out.data.resize(seqs.size() * row_bytes);
    if (format_.dtype == wire::OutputDType::kInt8) out.scales.resize(seqs.size());
    size_t row = 0;
    std::unique_ptr<PendingEmbeddings> pending;
    for (size_t k = 0; k <= batches.size(); ++k) {
      std::unique_ptr<PendingEmbeddings> next;
      if (k < batches.size()) {
        PETAL_ASSIGN_OR_RETURN(next, engine.Step(batches[k]));
      }
      if (pending) {
        PETAL_ASSIGN_OR_RETURN(Embeddings e, pending->Wait());
        for (int i = 0; i < e.rows; ++i, ++row) {
          float scale = 0;
          wire::EncodeRow(e.row(i), format_, reinterpret_cast<uint8_t*>(&out.data[row * row_bytes]),
                          &scale);
          if (!out.scales.empty()) out.scales[row] = scale;
        }
      }
      pending = std::move(next);
    }
    return out;
  }

  const DatasetOptions& opts_;
  wire::OutputFormat format_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job*> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// Servers through the gateway's ReplicaSet: least outstanding tokens, windows, retries.
class RemoteBackend final : public Backend {
 public:
  RemoteBackend(const DatasetOptions& o, v1::EmbedOptions so)
      : replicas_(o.servers, std::chrono::milliseconds(1000), std::chrono::minutes(10)),
        options_(std::move(so)) {}
  StatusOr<Encoded> Embed(const Seqs& seqs) override {
    std::promise<StatusOr<gateway::ChunkedResult>> p;
    auto f = p.get_future();
    gateway::EmbedChunks(&replicas_, seqs, gateway::SplitChunks(seqs, {}), options_,
                         "embed-" + std::to_string(next_id_++),
                         [&p](StatusOr<gateway::ChunkedResult> r) { p.set_value(std::move(r)); });
    PETAL_ASSIGN_OR_RETURN(auto r, f.get());
    PETAL_RETURN_IF_ERROR(gateway::CheckChunks(r));
    Encoded out;
    gateway::ForEachRow(r, [&](std::string_view row, float scale, const v1::EmbedResponse&) {
      out.data.append(row);
      if (options_.dtype() == v1::DTYPE_INT8) out.scales.push_back(scale);
    });
    return out;
  }
  bool AnyUp() const { return replicas_.AnyUp(); }

 private:
  gateway::ReplicaSet replicas_;
  v1::EmbedOptions options_;
  std::atomic<uint64_t> next_id_{0};
};

struct BatchResult {
  std::vector<std::string> ids;  // rows embedded, in order
  Encoded rows;
  std::vector<std::pair<const InputRow*, std::string>> bad;
  std::vector<InputRow> input;  // owns the rows `bad` points into
  Status status;
};

struct Part {
  std::string file;
  int64_t first_row = 0, rows = 0, written = 0, skipped = 0;
};

Status SaveManifest(const std::string& dir, const std::string& config,
                    const std::vector<Part>& parts) {
  std::string s = "{\"config\":" + JsonQuote(config) + ",\"parts\":[";
  for (size_t i = 0; i < parts.size(); ++i) {
    const Part& p = parts[i];
    if (i) s += ',';
    s += "\n{\"file\":" + JsonQuote(p.file) + ",\"first_row\":" + std::to_string(p.first_row) +
         ",\"rows\":" + std::to_string(p.rows) + ",\"written\":" + std::to_string(p.written) +
         ",\"skipped\":" + std::to_string(p.skipped) + "}";
  }
  s += "]}\n";
  const std::string tmp = dir + "/manifest.json.tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Internal(tmp + ": cannot write");
  const bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size() && std::fflush(f) == 0 &&
                  fsync(fileno(f)) == 0;
  std::fclose(f);
  if (!ok) return Internal(tmp + ": write failed");
  std::error_code ec;
  fs::rename(tmp, dir + "/manifest.json", ec);
  return ec ? Internal("manifest: " + ec.message()) : Status::Ok();
}

StatusOr<std::vector<Part>> LoadManifest(const std::string& dir, const std::string& config) {
  PETAL_ASSIGN_OR_RETURN(std::string text, ReadFile(dir + "/manifest.json"));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view cfg;
  simdjson::dom::array arr;
  if (parser.parse(text).get(doc) != simdjson::SUCCESS ||
      doc["config"].get_string().get(cfg) != simdjson::SUCCESS ||
      doc["parts"].get_array().get(arr) != simdjson::SUCCESS) {
    return DataLoss(dir + "/manifest.json is not a Petal manifest");
  }
  if (cfg != config) {
    return FailedPrecondition(dir + " was made with other options or input; use the same " +
                              "command line to --resume, or remove the folder\n  it has: " +
                              std::string(cfg) + "\n  this run: " + config);
  }
  std::vector<Part> parts;
  for (auto e : arr) {
    Part p;
    std::string_view file;
    if (e["file"].get_string().get(file) != simdjson::SUCCESS ||
        e["first_row"].get_int64().get(p.first_row) != simdjson::SUCCESS ||
        e["rows"].get_int64().get(p.rows) != simdjson::SUCCESS ||
        e["written"].get_int64().get(p.written) != simdjson::SUCCESS ||
        e["skipped"].get_int64().get(p.skipped) != simdjson::SUCCESS) {
      return DataLoss(dir + "/manifest.json: a part entry is malformed");
    }
    p.file.assign(file);
    if (!fs::exists(dir + "/" + p.file)) return DataLoss(dir + "/" + p.file + " is missing");
    parts.push_back(std::move(p));
  }
  return parts;
}

std::string Duration(double s) {
  char b[32];
  const long t = static_cast<long>(s);
  std::snprintf(b, sizeof(b), "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  return b;
}

}  // namespace

int RunEmbedDataset(const DatasetOptions& o) {
  signal(SIGPIPE, SIG_IGN);  // a helper that dies is reported through its exit status
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "petal embed: %s\n", s.message().c_str());
    return 1;
  };
  auto in_format = FormatOf(o.input);
  if (!in_format.ok()) return fail(in_format.status());
  if (*in_format == DatasetFormat::kNpy)
    return fail(InvalidArgument("--input: .jsonl or .parquet"));
  auto out_format = FormatOf(o.output);
  if (!out_format.ok()) return fail(out_format.status());
  if (*out_format == DatasetFormat::kJsonl)
    return fail(InvalidArgument("--output: .parquet or .npy"));
  ElemType type = o.dtype == "float16" ? ElemType::kFloat16
                  : o.dtype == "int8"  ? ElemType::kInt8
                                       : ElemType::kFloat32;

  // The model: tokenizer and config always come from the local folder.
  auto config = LoadModelConfig(o.model_dir);
  if (!config.ok()) return fail(config.status());
  if (o.dimensions < 0 || o.dimensions > config->hidden_size) {
    return fail(InvalidArgument("--dimensions is outside [1, " +
                                std::to_string(config->hidden_size) + "]"));
  }
  wire::OutputFormat format;
  format.dims = o.dimensions > 0 ? o.dimensions : config->hidden_size;
  format.normalize =
      wire::RenormalizeByDefault(config->normalize, format.dims, config->hidden_size);
  format.dtype = type == ElemType::kFloat16 ? wire::OutputDType::kFloat16
                 : type == ElemType::kInt8  ? wire::OutputDType::kInt8
                                            : wire::OutputDType::kFloat32;
  auto tokenizer = Tokenizer::FromModelDir(o.model_dir);
  if (!tokenizer.ok()) return fail(tokenizer.status());
  auto prompts = Prompts::Load(o.model_dir);
  if (!prompts.ok()) return fail(prompts.status());
  auto prefix = prompts->Prefix(o.prompt_name);
  if (!prefix.ok()) return fail(prefix.status());
  const int max_len =
      config->max_seq_length > 0 ? config->max_seq_length : config->max_position_embeddings;

  // The backend.
  std::unique_ptr<Backend> backend;
  if (o.servers.empty()) {
    auto local = std::make_unique<LocalBackend>(o, format);
    ModelConfig loaded;
    if (Status s = local->Start(&loaded); !s.ok()) return fail(s);
    backend = std::move(local);
  } else {
    v1::EmbedOptions so;
    so.set_dimensions(format.dims);
    so.set_dtype(type == ElemType::kFloat16 ? v1::DTYPE_FLOAT16
                 : type == ElemType::kInt8  ? v1::DTYPE_INT8
                                            : v1::DTYPE_FLOAT32);
    auto remote = std::make_unique<RemoteBackend>(o, so);
    // Servers that are still starting (e.g. pods of the same deployment) get a minute.
    for (int i = 0; i < 120 && !remote->AnyUp(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (!remote->AnyUp()) return fail(Unavailable("no --server is serving"));
    backend = std::move(remote);
  }

  // The rows of this shard, and what was done before.
  auto total = CountRows(o.input, *in_format);
  if (!total.ok()) return fail(total.status());
  const int64_t start = *total * o.shard_index / o.shard_count;
  const int64_t stop = *total * (o.shard_index + 1) / o.shard_count;
  const std::string dir = o.output + ".parts";
  const std::string cfg =
      "{\"input\":" + JsonQuote(fs::absolute(o.input).string()) +
      ",\"rows\":" + std::to_string(*total) + ",\"shard\":\"" + std::to_string(o.shard_index) +
      "/" + std::to_string(o.shard_count) + "\",\"text_field\":" + JsonQuote(o.text_field) +
      ",\"id_field\":" + JsonQuote(o.id_field) + ",\"model\":" + JsonQuote(o.model_dir) +
      ",\"dimensions\":" + std::to_string(format.dims) + ",\"dtype\":\"" + ElemTypeName(type) +
      "\",\"normalized\":" + (format.normalize ? "true" : "false") +
      ",\"prompt\":" + JsonQuote(*prefix) + ",\"truncate\":" + (o.truncate ? "true" : "false") +
      ",\"on_error\":\"" + o.on_error + "\",\"rows_per_part\":" + std::to_string(o.rows_per_part) +
      "}";
  std::vector<Part> parts;
  if (fs::exists(dir)) {
    if (!o.resume) {
      return fail(FailedPrecondition(dir + " exists (an unfinished run): add --resume to "
                                           "continue it, or remove it"));
    }
    auto loaded = LoadManifest(dir, cfg);
    if (!loaded.ok()) return fail(loaded.status());
    parts = std::move(loaded).value();
  } else {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return fail(Internal(dir + ": " + ec.message()));
    if (Status s = SaveManifest(dir, cfg, parts); !s.ok()) return fail(s);
  }

  auto writer = OpenPartWriter(*out_format, format.dims, type);
  if (!writer.ok()) return fail(writer.status());
  const int64_t resume_row = start + static_cast<int64_t>(parts.size()) * o.rows_per_part;
  ReaderOptions ro{o.text_field, o.id_field, static_cast<size_t>(o.batch_rows)};
  auto reader = OpenReader(o.input, *in_format, ro, std::min(resume_row, stop), stop);
  if (!reader.ok()) return fail(reader.status());
  const std::string metadata =
      "{\"model\":" + JsonQuote(fs::path(o.model_dir).filename().string()) + ",\"options\":" + cfg +
      ",\"servers\":" + std::to_string(o.servers.size()) + "}";

  // One task: tokenize, check, embed. Tasks run concurrently; their results are written in order.
  EncodeOptions eo;
  eo.add_special_tokens = true;
  eo.max_length = o.truncate ? max_len : 0;
  auto task = [&](std::vector<InputRow> rows) {
    BatchResult r;
    r.input = std::move(rows);
    Seqs seqs;
    for (const InputRow& row : r.input) {
      if (!row.error.empty()) {
        r.bad.emplace_back(&row, row.error);
        continue;
      }
      if (row.text.empty()) {
        r.bad.emplace_back(&row, "empty text");
        continue;
      }
      auto ids = (*tokenizer)->Encode(prefix->empty() ? row.text : *prefix + row.text, eo);
      if (!ids.ok()) {
        r.bad.emplace_back(&row, ids.status().message());
      } else if (static_cast<int>(ids->size()) > max_len) {
        r.bad.emplace_back(&row, "text has " + std::to_string(ids->size()) +
                                     " tokens, more than the model's " + std::to_string(max_len) +
                                     " (--truncate cuts it)");
      } else {
        seqs.push_back(std::move(ids).value());
        r.ids.push_back(row.id);
      }
    }
    if (!seqs.empty()) {
      auto e = backend->Embed(seqs);
      if (e.ok()) {
        r.rows = std::move(e).value();
      } else {
        r.status = e.status();
      }
    }
    return r;
  };

  const int threads = o.threads > 0 ? o.threads : std::max(2u, std::thread::hardware_concurrency());
  const bool tty = o.progress && isatty(STDERR_FILENO);
  const auto t0 = Clock::now();
  auto last_report = t0;
  int64_t done_rows = 0, written = 0, skipped = 0;
  for (const Part& p : parts) {
    written += p.written;
    skipped += p.skipped;
  }
  auto report = [&](bool final) {
    const auto now = Clock::now();
    if (!final &&
        now - last_report < (tty ? std::chrono::milliseconds(250) : std::chrono::seconds(10))) {
      return;
    }
    last_report = now;
    const double el = std::chrono::duration<double>(now - t0).count();
    const double rate = el > 0 ? done_rows / el : 0;
    const int64_t left = stop - resume_row - done_rows;
    const int64_t pos = resume_row - start + done_rows;
    const int64_t span = std::max<int64_t>(1, stop - start);
    char line[256];
    if (tty) {
      char bar[31];
      const int fill = static_cast<int>(30 * pos / span);
      for (int i = 0; i < 30; ++i) bar[i] = i < fill ? '#' : '.';
      bar[30] = 0;
      std::snprintf(line, sizeof(line), "\r[%s] %lld/%lld rows  %.0f rows/s  ETA %s ", bar,
                    static_cast<long long>(pos), static_cast<long long>(span), rate,
                    Duration(rate > 0 ? left / rate : 0).c_str());
    } else {
      std::snprintf(line, sizeof(line),
                    "petal embed: %lld/%lld rows, %.0f rows/s, ETA %s, %lld skipped\n",
                    static_cast<long long>(pos), static_cast<long long>(span), rate,
                    Duration(rate > 0 ? left / rate : 0).c_str(), static_cast<long long>(skipped));
    }
    std::fputs(line, stderr);
    if (final && tty) std::fputs("\n", stderr);
  };

  std::vector<InputRow> carry;  // rows read past the current part's end
  for (int64_t part_start = resume_row; part_start < stop; part_start += o.rows_per_part) {
    const int64_t part_end = std::min(stop, part_start + o.rows_per_part);
    Part part;
    part.file = (*writer)->PartName(static_cast<int>(parts.size()));
    part.first_row = part_start;
    part.rows = part_end - part_start;
    if (Status s = (*writer)->Open(dir + "/" + part.file, metadata); !s.ok()) return fail(s);
    std::deque<std::future<BatchResult>> inflight;
    bool failed = false;
    auto drain_one = [&]() -> Status {
      BatchResult r = inflight.front().get();
      inflight.pop_front();
      for (const auto& [row, why] : r.bad) {
        std::fprintf(stderr, "%spetal embed: row %lld (id %s): %s\n", tty ? "\n" : "",
                     static_cast<long long>(row->row), JsonQuote(row->id).c_str(), why.c_str());
      }
      if (!r.bad.empty() && o.on_error == "fail") {
        return InvalidArgument("stopped at a bad row (--on-error skip goes on past them)");
      }
      PETAL_RETURN_IF_ERROR(r.status);
      part.skipped += static_cast<int64_t>(r.bad.size());
      part.written += static_cast<int64_t>(r.ids.size());
      skipped += static_cast<int64_t>(r.bad.size());
      written += static_cast<int64_t>(r.ids.size());
      done_rows += static_cast<int64_t>(r.input.size());
      if (!r.ids.empty())
        PETAL_RETURN_IF_ERROR((*writer)->Write(r.ids, r.rows.data, r.rows.scales));
      report(false);
      return Status::Ok();
    };
    int64_t next = part_start;
    Status st;
    while (next < part_end && st.ok()) {
      std::vector<InputRow> rows;
      if (!carry.empty()) {
        rows = std::move(carry);
        carry.clear();
      } else {
        auto more = (*reader)->Next(&rows);
        if (!more.ok()) {
          st = more.status();
          break;
        }
        if (!*more) {
          st = DataLoss(o.input + " ended at row " + std::to_string(next) + "; expected " +
                        std::to_string(stop) + " rows (did it change?)");
          break;
        }
      }
      // Keep rows of the next part for it.
      size_t keep = 0;
      while (keep < rows.size() && rows[keep].row < part_end) ++keep;
      if (keep < rows.size()) {
        carry.assign(std::make_move_iterator(rows.begin() + keep),
                     std::make_move_iterator(rows.end()));
        rows.resize(keep);
      }
      next += static_cast<int64_t>(rows.size());
      inflight.push_back(std::async(std::launch::async, task, std::move(rows)));
      while (st.ok() && static_cast<int>(inflight.size()) >= threads) st = drain_one();
    }
    while (st.ok() && !inflight.empty()) st = drain_one();
    if (!st.ok()) {
      failed = true;
      inflight.clear();  // waits for the running tasks
      report(true);
      return fail(st);
    }
    (void)failed;
    if (Status s = (*writer)->Close(); !s.ok()) return fail(s);
    parts.push_back(part);
    if (Status s = SaveManifest(dir, cfg, parts); !s.ok()) return fail(s);
  }
  report(true);

  // Every part is done: merge them into the output and remove the parts.
  std::vector<std::string> files;
  for (const Part& p : parts) files.push_back(dir + "/" + p.file);
  if (Status s = (*writer)->Merge(files, o.output, metadata); !s.ok()) return fail(s);
  std::error_code ec;
  fs::remove_all(dir, ec);
  const double el = std::chrono::duration<double>(Clock::now() - t0).count();
  std::fprintf(stderr, "petal embed: wrote %lld rows to %s (%lld skipped) in %.1f s, %.0f rows/s\n",
               static_cast<long long>(written), o.output.c_str(), static_cast<long long>(skipped),
               el, el > 0 ? done_rows / el : 0.0);
  return 0;
}

}  // namespace petal::cli
