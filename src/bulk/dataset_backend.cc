#include "bulk/dataset_backend.h"

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "gateway/chunker.h"
#include "gateway/embed_format.h"
#include "gateway/replica_set.h"
#include "model/config.h"
#include "server/fake_engine.h"

namespace petal::bulk {
namespace {

// Encodes pooled rows `e` into `out` starting at row `row0`.
void EncodeRows(const Embeddings& e, const wire::OutputFormat& format, size_t row0, Encoded* out) {
  const size_t row_bytes = wire::BytesPerRow(format);
  for (int i = 0; i < e.rows; ++i) {
    float scale = 0;
    wire::EncodeRow(e.row(i), format,
                    reinterpret_cast<uint8_t*>(&out->data[(row0 + i) * row_bytes]), &scale);
    if (!out->scales.empty()) out->scales[row0 + i] = scale;
  }
}

class LocalBackend final : public Backend {
 public:
  LocalBackend(const DatasetOptions& o, const wire::OutputFormat& f) : opts_(o), format_(f) {}
  ~LocalBackend() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void Launch() {
    std::vector<int> devices = opts_.devices;
    if (devices.empty()) devices.push_back(opts_.engine.cuda.device);
    ready_.resize(devices.size());
    for (size_t i = 0; i < devices.size(); ++i) {
      threads_.emplace_back([this, d = devices[i], p = &ready_[i]] { Worker(d, p); });
    }
  }
  Status Ready() override {
    for (auto& r : ready_) PETAL_RETURN_IF_ERROR(r.get_future().get());
    ready_.clear();
    return Status::Ok();
  }
  StatusOr<Encoded> Embed(const Seqs& seqs) override {
    Job job;
    // Sub-batches within the engine's token and sequence budgets, built here (not on the
    // engine's thread).
    for (const auto& s : seqs) {
      if (job.batches.empty() || job.batches.back().num_seqs() >= max_seqs_ ||
          (job.batches.back().num_tokens() > 0 &&
           job.batches.back().num_tokens() + static_cast<int>(s.size()) > opts_.max_batch_tokens)) {
        job.batches.emplace_back();
        job.batches.back().cu_seqlens.push_back(0);
      }
      job.batches.back().Add(s);
    }
    Encoded out;
    if (job.batches.empty()) return out;
    job.results.resize(job.batches.size());
    auto f = job.done.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(&job);
    }
    cv_.notify_one();
    PETAL_RETURN_IF_ERROR(f.get());
    out.data.resize(seqs.size() * wire::BytesPerRow(format_));
    if (format_.dtype == wire::OutputDType::kInt8) out.scales.resize(seqs.size());
    size_t row = 0;
    for (const Embeddings& e : job.results) {
      EncodeRows(e, format_, row, &out);
      row += static_cast<size_t>(e.rows);
    }
    return out;
  }

 private:
  struct Job {
    std::vector<Batch> batches;
    std::vector<Embeddings> results;  // one per batch, filled by the worker
    size_t stepped = 0, waited = 0;   // worker-only counters
    Status status;
    std::promise<Status> done;
  };
  struct InFlight {
    Job* job;
    size_t batch;
    std::unique_ptr<PendingEmbeddings> handle;
  };
  StatusOr<std::unique_ptr<Engine>> Create(int device) {
    EngineOptions eo = opts_.engine;
    eo.cuda.device = device;
    eo.cuda.max_tokens = std::max(eo.cuda.max_tokens, opts_.max_batch_tokens);
    // A text longer than --max-batch-tokens runs in a step of its own: the engine must hold it.
    if (auto c = LoadModelConfig(opts_.model_dir); c.ok()) {
      eo.cuda.max_tokens = std::max(eo.cuda.max_tokens, c->max_position_embeddings);
    }
    if (opts_.fake_engine) {
      PETAL_ASSIGN_OR_RETURN(ModelConfig c, LoadModelConfig(opts_.model_dir));
      server::FakeEngineOptions fo;
      fo.hidden_size = c.hidden_size;
      fo.vocab_size = c.vocab_size;
      fo.max_positions = c.max_position_embeddings;
      fo.normalize = c.normalize;
      fo.hashed_rows = true;
      return std::unique_ptr<Engine>(new server::FakeEngine(fo));
    }
    return CreateEngine(opts_.model_dir, eo);
  }
  // Steps batches of queued jobs in order, keeping kDepth of them enqueued on the engine, and
  // completes each job when its last batch has been waited on.
  void Worker(int device, std::promise<Status>* ready) {
    auto engine = Create(device);
    if (!engine.ok()) return ready->set_value(engine.status());
    ready->set_value(Status::Ok());
    // Three steps enqueued (of the engine's ring_slots, 4 by default): the GPU keeps two
    // batches of work while this thread waits to be scheduled on a busy host.
    constexpr size_t kDepth = 3;
    std::deque<InFlight> inflight;
    Job* current = nullptr;
    for (;;) {
      while (inflight.size() < kDepth) {
        if (!current) {
          std::unique_lock<std::mutex> lock(mu_);
          if (inflight.empty()) cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
          if (jobs_.empty()) break;
          current = jobs_.front();
          jobs_.pop_front();
        }
        const size_t k = current->stepped++;
        auto h = (*engine)->Step(current->batches[k]);
        inflight.push_back(
            {current, k,
             h.ok() ? std::move(h).value() : std::make_unique<ReadyEmbeddings>(h.status())});
        if (current->stepped == current->batches.size()) current = nullptr;
      }
      if (inflight.empty()) return;  // stopping, nothing queued
      InFlight f = std::move(inflight.front());
      inflight.pop_front();
      auto e = f.handle->Wait();
      Job* j = f.job;
      if (e.ok()) {
        j->results[f.batch] = std::move(e).value();
      } else if (j->status.ok()) {
        j->status = e.status();
      }
      if (++j->waited == j->batches.size()) j->done.set_value(j->status);
    }
  }

  const DatasetOptions& opts_;
  const wire::OutputFormat format_;
  const int max_seqs_ = std::max(1, opts_.engine.cuda.max_seqs);
  std::vector<std::promise<Status>> ready_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job*> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

class RemoteBackend final : public Backend {
 public:
  RemoteBackend(const DatasetOptions& o, v1::EmbedOptions so)
      : replicas_(o.servers, std::chrono::milliseconds(1000), std::chrono::minutes(10)),
        options_(std::move(so)) {}
  Status Ready() override {
    // Servers that are still starting (e.g. pods of the same deployment) get a minute.
    for (int i = 0; i < 120 && !replicas_.AnyUp(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return replicas_.AnyUp() ? Status::Ok() : Unavailable("no --server is serving");
  }
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

 private:
  gateway::ReplicaSet replicas_;
  v1::EmbedOptions options_;
  std::atomic<uint64_t> next_id_{0};
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> StartBackend(const DatasetOptions& o,
                                                const wire::OutputFormat& format) {
  if (o.servers.empty()) {
    auto local = std::make_unique<LocalBackend>(o, format);
    local->Launch();
    return std::unique_ptr<Backend>(std::move(local));
  }
  v1::EmbedOptions so;
  so.set_dimensions(format.dims);
  so.set_dtype(format.dtype == wire::OutputDType::kFloat16 ? v1::DTYPE_FLOAT16
               : format.dtype == wire::OutputDType::kInt8  ? v1::DTYPE_INT8
                                                           : v1::DTYPE_FLOAT32);
  return std::unique_ptr<Backend>(new RemoteBackend(o, std::move(so)));
}

}  // namespace petal::bulk
