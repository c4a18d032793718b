#include "server/fake_engine.h"

#include <cmath>
#include <thread>

#include "wire/codec.h"

namespace petal::server {
namespace {

class FakePending final : public PendingEmbeddings {
 public:
  FakePending(Embeddings e, std::chrono::steady_clock::time_point ready_at,
              std::shared_ptr<FakeEngine::Gate> gate, std::shared_ptr<std::atomic<int>> held)
      : result_(std::move(e)), ready_at_(ready_at), gate_(std::move(gate)), held_(std::move(held)) {
    held_->fetch_add(1);
  }
  ~FakePending() override { ReleaseSlot(); }
  bool Ready() override {
    std::lock_guard<std::mutex> lock(gate_->mu);
    return !gate_->held && std::chrono::steady_clock::now() >= ready_at_;
  }
  StatusOr<Embeddings> Wait() override {
    {
      std::unique_lock<std::mutex> lock(gate_->mu);
      gate_->cv.wait(lock, [&] { return !gate_->held; });
    }
    std::this_thread::sleep_until(ready_at_);
    ReleaseSlot();  // as the CUDA engine's handle frees its slot once the result is copied out
    return std::move(result_);
  }

 private:
  void ReleaseSlot() {
    if (held_) held_->fetch_sub(1);
    held_.reset();
  }
  Embeddings result_;
  std::chrono::steady_clock::time_point ready_at_;
  std::shared_ptr<FakeEngine::Gate> gate_;
  std::shared_ptr<std::atomic<int>> held_;
};

}  // namespace

FakeEngine::FakeEngine(FakeEngineOptions options) : options_(options) {
  config_.model_dir = "fake";
  config_.hf_architecture = "FakeModel";
  config_.architecture = Architecture::kBert;
  config_.hidden_size = options.hidden_size;
  config_.num_layers = 1;
  config_.num_heads = 1;
  config_.num_kv_heads = 1;
  config_.head_dim = options.hidden_size;
  config_.vocab_size = options.vocab_size;
  config_.max_position_embeddings = options.max_positions;
  config_.max_seq_length = options.max_positions;
  config_.pooling = PoolingMode::kMean;
  config_.normalize = options.normalize;
}

std::vector<float> FakeEngine::Reference(const std::vector<int32_t>& ids,
                                         const FakeEngineOptions& o) {
  // Position-dependent, so permuted or mixed-up sequences give different rows; signs vary across
  // dimensions, so the binary formats are exercised too.
  std::vector<float> e(o.hidden_size, 0.0f);
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int d = 0; d < o.hidden_size; ++d) {
      e[d] +=
          static_cast<float>(std::cos(0.37 * ids[i] * (d + 1) + 0.11 * static_cast<double>(i) + d));
    }
  }
  for (float& v : e) v /= static_cast<float>(ids.empty() ? 1 : ids.size());
  if (o.normalize) wire::L2Normalize(e.data(), o.hidden_size);
  return e;
}

std::vector<float> FakeEngine::HashedReference(const int32_t* ids, size_t n,
                                               const FakeEngineOptions& o) {
  uint64_t h = 1469598103934665603ull ^ n;  // FNV-1a over the ids, then xorshift per dimension
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint32_t>(ids[i])) * 1099511628211ull;
  std::vector<float> e(o.hidden_size);
  for (float& v : e) {
    h ^= h << 13;
    h ^= h >> 7;
    h ^= h << 17;
    v = static_cast<float>(static_cast<int64_t>(h >> 11) - (int64_t{1} << 52)) / 4.5035996e15f;
  }
  if (o.normalize) wire::L2Normalize(e.data(), o.hidden_size);
  return e;
}

StatusOr<std::unique_ptr<PendingEmbeddings>> FakeEngine::Step(const Batch& batch) {
  PETAL_RETURN_IF_ERROR(batch.Validate(config_.vocab_size, config_.max_position_embeddings));
  FakeBatchRecord rec{batch.num_seqs(), batch.num_tokens(), {}};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fail_next_ > 0) {
      --fail_next_;
      return Internal("fake engine: injected failure");
    }
  }
  if (options_.result_slots > 0 && held_->load() >= options_.result_slots) {
    return ResourceExhausted("all " + std::to_string(options_.result_slots) +
                             " result slots are held by handles that were not waited on");
  }
  Embeddings out;
  out.rows = batch.num_rows();
  out.dim = options_.hidden_size;
  out.data = TakeRowBuffer();  // as the CUDA engine's: the loop gives it back
  out.data.reserve(static_cast<size_t>(out.rows) * out.dim);
  for (int s = 0; s < batch.num_seqs(); ++s)
    rec.first_tokens.push_back(batch.seq_len(s) == 0 ? -1 : batch.token_ids[batch.cu_seqlens[s]]);
  // Pooling spans: the reference of the span's tokens (normalised iff the span says so).
  for (int i = 0; i < batch.num_spans(); ++i) {
    const int32_t* sp = batch.pool_spans.data() + Batch::kSpanInts * i;
    std::vector<int32_t> ids(batch.token_ids.begin() + sp[0], batch.token_ids.begin() + sp[1]);
    FakeEngineOptions o = options_;
    o.normalize = (sp[2] & Batch::kSpanNormalize) != 0;
    auto row = Reference(ids, o);
    out.data.insert(out.data.end(), row.begin(), row.end());
  }
  for (int s = 0; s < batch.num_seqs() && batch.pool_spans.empty() && options_.hashed_rows; ++s) {
    auto row =
        HashedReference(batch.token_ids.data() + batch.cu_seqlens[s], batch.seq_len(s), options_);
    out.data.insert(out.data.end(), row.begin(), row.end());
  }
  for (int s = 0; s < batch.num_seqs() && batch.pool_spans.empty() && !options_.hashed_rows; ++s) {
    std::vector<int32_t> ids(batch.token_ids.begin() + batch.cu_seqlens[s],
                             batch.token_ids.begin() + batch.cu_seqlens[s + 1]);
    auto row = Reference(ids, options_);
    out.data.insert(out.data.end(), row.begin(), row.end());
  }
  // Batches run back to back on the simulated device.
  const auto now = std::chrono::steady_clock::now();
  const auto start = std::max(now, device_free_);
  device_free_ = start + options_.per_batch + options_.per_token * batch.num_tokens();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (batches_.size() >= 2 * kKeptBatches)
      batches_.erase(batches_.begin(), batches_.end() - kKeptBatches);
    batches_.push_back(std::move(rec));
    ++batches_run_;
  }
  return std::unique_ptr<PendingEmbeddings>(
      new FakePending(std::move(out), device_free_, gate_, held_));
}

void FakeEngine::Hold() {
  std::lock_guard<std::mutex> lock(gate_->mu);
  gate_->held = true;
}

void FakeEngine::Release() {
  {
    std::lock_guard<std::mutex> lock(gate_->mu);
    gate_->held = false;
  }
  gate_->cv.notify_all();
}

void FakeEngine::FailNextSteps(int n) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_next_ = n;
}

std::map<std::string, double> FakeEngine::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {{"batches", static_cast<double>(batches_run_)}};
}

std::vector<FakeBatchRecord> FakeEngine::batches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return batches_;
}

}  // namespace petal::server
