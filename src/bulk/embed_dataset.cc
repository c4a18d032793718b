#include "bulk/embed_dataset.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <future>
#include <thread>

#include "bulk/dataset_backend.h"
#include "bulk/dataset_io.h"
#include "bulk/dataset_manifest.h"
#include "bulk/dataset_write.h"
#include "common/process_clock.h"
#include "model/config.h"
#include "tokenizer/prompts.h"
#include "tokenizer/tokenizer.h"
#include "wire/codec.h"

namespace petal::bulk {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct BatchResult {
  std::vector<std::string> ids;  // rows embedded, in order
  Encoded rows;
  std::vector<std::pair<const InputRow*, std::string>> bad;
  std::vector<InputRow> input;  // owns the rows `bad` points into
  Status status;
};

std::string Duration(double s) {
  char b[32];
  const long t = static_cast<long>(s);
  std::snprintf(b, sizeof(b), "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  return b;
}

// Progress on stderr: a bar with rows/s and ETA on a terminal (4 times a second), else a log
// line every 10 s. Rates count from Start() (the engines ready), not from the process start.
class Progress {
 public:
  Progress(bool enabled, int64_t done_before, int64_t span)
      : tty_(enabled && isatty(STDERR_FILENO)),
        enabled_(enabled),
        before_(done_before),
        span_(std::max<int64_t>(1, span)) {}
  void Start() { t0_ = last_ = Clock::now(); }
  bool tty() const { return tty_; }
  double Seconds() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  void Report(int64_t done, int64_t skipped, bool final) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (!final && now - last_ < (tty_ ? std::chrono::milliseconds(250) : std::chrono::seconds(10)))
      return;
    last_ = now;
    const double el = Seconds();
    const double rate = el > 0 ? done / el : 0;
    const int64_t pos = before_ + done;
    const std::string eta = Duration(rate > 0 ? (span_ - pos) / rate : 0);
    if (tty_) {
      char bar[31];
      const int fill = static_cast<int>(30 * pos / span_);
      for (int i = 0; i < 30; ++i) bar[i] = i < fill ? '#' : '.';
      bar[30] = 0;
      std::fprintf(stderr, "\r[%s] %lld/%lld rows  %.0f rows/s  ETA %s %s", bar,
                   static_cast<long long>(pos), static_cast<long long>(span_), rate, eta.c_str(),
                   final ? "\n" : "");
    } else {
      std::fprintf(stderr, "petal embed: %lld/%lld rows, %.0f rows/s, ETA %s, %lld skipped\n",
                   static_cast<long long>(pos), static_cast<long long>(span_), rate, eta.c_str(),
                   static_cast<long long>(skipped));
    }
  }

 private:
  const bool tty_, enabled_;
  const int64_t before_, span_;
  Clock::time_point t0_, last_;
};

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
  if (config->task != ModelTask::kEmbed)  // its rows are not embeddings of hidden_size floats
    return fail(InvalidArgument(std::string("--input / --output need an embedding model; this one "
                                            "is a ") +
                                ModelTaskName(config->task) +
                                " model (petal embed TEXT... prints a sparse model's rows)"));
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
  // The backend: local engines start loading now, while the tokenizer loads, the input is
  // counted and the finished parts are replayed. The clock covers the whole command: it starts
  // with the process.
  const auto t_start = Clock::now() - std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(ProcessAgeSeconds()));
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  auto backend = StartBackend(o, format);
  if (!backend.ok()) return fail(backend.status());
  auto tokenizer = Tokenizer::FromModelDir(o.model_dir);
  if (!tokenizer.ok()) return fail(tokenizer.status());
  auto prompts = Prompts::Load(o.model_dir);
  if (!prompts.ok()) return fail(prompts.status());
  auto prefix = prompts->Prefix(o.prompt_name);
  if (!prefix.ok()) return fail(prefix.status());
  const int max_len =
      config->max_seq_length > 0 ? config->max_seq_length : config->max_position_embeddings;

  // The rows of this shard, and what was done before.
  auto total = CountRows(o.input, *in_format);
  if (!total.ok()) return fail(total.status());
  const int64_t start = *total * o.shard_index / o.shard_count;
  const int64_t stop = *total * (o.shard_index + 1) / o.shard_count;
  const std::string dir = o.output + ".parts";
  const std::string cfg =
      "{\"input\":" + JsonLiteral(fs::absolute(o.input).string()) +
      ",\"rows\":" + std::to_string(*total) + ",\"shard\":\"" + std::to_string(o.shard_index) +
      "/" + std::to_string(o.shard_count) + "\",\"text_field\":" + JsonLiteral(o.text_field) +
      ",\"id_field\":" + JsonLiteral(o.id_field) + ",\"model\":" + JsonLiteral(o.model_dir) +
      ",\"dimensions\":" + std::to_string(format.dims) + ",\"dtype\":\"" + ElemTypeName(type) +
      "\",\"normalized\":" + (format.normalize ? "true" : "false") +
      ",\"prompt\":" + JsonLiteral(*prefix) + ",\"truncate\":" + (o.truncate ? "true" : "false") +
      ",\"on_error\":\"" + o.on_error + "\",\"rows_per_part\":" + std::to_string(o.rows_per_part) +
      ",\"parts\":\"raw-v2\"}";
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
  // The reader starts first: its first rows are on the critical path (the Parquet helper's
  // Python start-up overlaps the engine's).
  const int64_t resume_row = start + static_cast<int64_t>(parts.size()) * o.rows_per_part;
  ReaderOptions ro{o.text_field, o.id_field, static_cast<size_t>(o.batch_rows)};
  auto opened = OpenReader(o.input, *in_format, ro, std::min(resume_row, stop), stop);
  if (!opened.ok()) return fail(opened.status());
  auto reader = Prefetch(std::move(opened).value(), 16);
  const std::string metadata =
      "{\"model\":" + JsonLiteral(fs::path(o.model_dir).filename().string()) +
      ",\"options\":" + cfg + ",\"servers\":" + std::to_string(o.servers.size()) + "}";
  auto sink = OpenOutputSink(*out_format, o.output, dir, format.dims, type, metadata);
  if (!sink.ok()) return fail(sink.status());
  int64_t written = 0, skipped = 0;
  for (const Part& p : parts) {  // a resumed run: the output again from the finished parts
    written += p.written;
    skipped += p.skipped;
    Status s = PartFile::ForEachBlock(dir + "/" + p.file, format.dims, type, 4096,
                                      [&](RowBlock b) { return (*sink)->Append(std::move(b)); });
    if (!s.ok()) return fail(s);
  }
  const auto t_ready = Clock::now();
  if (Status s = (*backend)->Ready(); !s.ok()) return fail(s);
  const double wait_ready = since(t_ready);
  const double startup_s = std::chrono::duration<double>(Clock::now() - t_start).count();

  // One task: tokenize, check, embed. Tasks run concurrently; their results are written in order.
  EncodeOptions eo;
  eo.add_special_tokens = true;
  eo.max_length = o.truncate ? max_len : 0;
  auto task = [&](std::vector<InputRow> rows) {
    // Tokenizing is the bulk of the host's work; at a lower priority it never delays the
    // threads that keep the pipeline moving (engine feeders, reader, writer, this main loop).
    setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 5);
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
      auto e = (*backend)->Embed(seqs);
      if (e.ok()) {
        r.rows = std::move(e).value();
      } else {
        r.status = e.status();
      }
    }
    return r;
  };

  const int threads = o.threads > 0 ? o.threads : std::max(2u, std::thread::hardware_concurrency());
  Progress progress(o.progress, resume_row - start, stop - start);
  progress.Start();
  int64_t done_rows = 0;  // rows of this run drained (embedded or skipped)

  // Parts: tasks never span two; the current part is handed to the committer (durable, then in
  // the manifest, on its own thread) when its last row has been drained.
  PartCommitter committer(dir, cfg, parts);
  std::unique_ptr<PartFile> part_file;
  Part part;
  int next_part = static_cast<int>(parts.size());
  auto open_part = [&](int64_t first) -> Status {
    part = Part{};
    part.file = PartFile::Name(next_part++);
    part.first_row = first;
    part.rows = std::min(stop, first + o.rows_per_part) - first;
    part_file = std::make_unique<PartFile>(format.dims, type);
    return part_file->Open(dir + "/" + part.file);
  };
  // Where the main thread waits (seconds), printed at the end: what bounds a run.
  double wait_read = 0, wait_tasks = 0, wait_write = 0;
  std::deque<std::future<BatchResult>> inflight;
  auto drain_one = [&]() -> Status {
    auto t = Clock::now();
    BatchResult r = inflight.front().get();
    inflight.pop_front();
    wait_tasks += since(t);
    for (const auto& [row, why] : r.bad) {
      std::fprintf(stderr, "%spetal embed: row %lld (id %s): %s\n", progress.tty() ? "\n" : "",
                   static_cast<long long>(row->row), JsonLiteral(row->id).c_str(), why.c_str());
    }
    if (!r.bad.empty() && o.on_error == "fail") {
      return InvalidArgument("stopped at a bad row (--on-error skip goes on past them)");
    }
    PETAL_RETURN_IF_ERROR(r.status);
    if (r.input.empty()) return Status::Ok();
    part.skipped += static_cast<int64_t>(r.bad.size());
    part.written += static_cast<int64_t>(r.ids.size());
    skipped += static_cast<int64_t>(r.bad.size());
    written += static_cast<int64_t>(r.ids.size());
    done_rows += static_cast<int64_t>(r.input.size());
    t = Clock::now();
    if (!r.ids.empty()) {
      RowBlock block{std::move(r.ids), std::move(r.rows.data), std::move(r.rows.scales)};
      PETAL_RETURN_IF_ERROR(part_file->Write(block));
      PETAL_RETURN_IF_ERROR((*sink)->Append(std::move(block)));
    }
    if (part.written + part.skipped == part.rows) {  // the part is complete
      PETAL_RETURN_IF_ERROR(committer.Commit(std::move(part_file), part));
      if (part.first_row + part.rows < stop) {
        PETAL_RETURN_IF_ERROR(open_part(part.first_row + part.rows));
      }
    }
    wait_write += since(t);
    progress.Report(done_rows, skipped, false);
    return Status::Ok();
  };

  Status st;
  if (resume_row < stop) st = open_part(resume_row);
  int64_t next = resume_row;
  std::vector<InputRow> carry;  // rows read past a part's end
  while (st.ok() && next < stop) {
    std::vector<InputRow> rows;
    if (!carry.empty()) {
      rows = std::move(carry);
      carry.clear();
    } else {
      const auto t = Clock::now();
      auto more = reader->Next(&rows);
      wait_read += since(t);
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
    // A task ends at its part's end; the rest waits for the next task.
    const int64_t part_end = start + ((next - start) / o.rows_per_part + 1) * o.rows_per_part;
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
  if (st.ok()) st = committer.Wait();
  if (!st.ok()) {
    inflight.clear();  // waits for the running tasks
    progress.Report(done_rows, skipped, true);
    return fail(st);
  }
  progress.Report(done_rows, skipped, true);
  const double embed_s = progress.Seconds();

  // Every part is done: the output is complete; make it durable and remove the parts.
  const auto t_finish = Clock::now();
  if (Status s = (*sink)->Finish(); !s.ok()) return fail(s);
  const double finish_s = since(t_finish);
  const auto t_remove = Clock::now();
  RemoveParts(dir);
  const double remove_s = since(t_remove);
  const double el = std::chrono::duration<double>(Clock::now() - t_start).count();
  std::fprintf(stderr,
               "petal embed: wrote %lld rows to %s (%lld skipped) in %.1f s, %.0f rows/s "
               "(start-up %.2f s; embedding %.0f rows/s over %.2f s; closing %.2f s)\n"
               "petal embed: the main thread waited %.2f s for the engine to load, %.2f s for "
               "input, %.2f s for tasks, %.2f s writing, %.2f s closing the output and %.2f s "
               "removing the parts\n",
               static_cast<long long>(written), o.output.c_str(), static_cast<long long>(skipped),
               el, el > 0 ? done_rows / el : 0.0, startup_s,
               embed_s > 0 ? done_rows / embed_s : 0.0, embed_s, el - startup_s - embed_s,
               wait_ready, wait_read, wait_tasks, wait_write, finish_s, remove_s);
  // The output is durable and the parts are gone: skip tearing down the engines and the CUDA
  // context, which nobody needs to wait for (not measured alone; on the H200 the process start
  // and exit together took 0.38-0.52 s outside the clock above, before it covered the start).
  std::fflush(nullptr);
  std::_Exit(0);
}

}  // namespace petal::bulk
