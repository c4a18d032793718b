#include "server/engine_loop.h"

#include <algorithm>
#include <atomic>

#include "common/log.h"
#include "common/recycler.h"
#include "server/engine_loop_internal.h"
#include "server/row_output.h"
#include "wire/recycled.h"

namespace petal::server {
namespace {
thread_local bool t_on_loop_thread = false;  // set by the loop's own threads
}  // namespace

bool OnEngineLoopThread() { return t_on_loop_thread; }

namespace {

// A multi-vector model answers one row per token, and both engines size their result buffers for
// a whole batch of them (max_batch_tokens rows), so its batches are bounded by tokens, not by the
// span-row bound (2,048 by default) that would split 100 x 256-token documents into 13 batches.
EngineLoopOptions ForEngine(const Engine* engine, EngineLoopOptions o) {
  if (engine != nullptr && engine->config().task == ModelTask::kMultiVector)
    o.limits.max_batch_rows = std::max(o.limits.max_batch_rows, o.limits.max_batch_tokens);
  return o;
}

}  // namespace

EngineLoop::EngineLoop(Engine* engine, EngineLoopOptions options, ServerMetrics* metrics)
    : engine_(engine), options_(ForEngine(engine, options)), metrics_(metrics) {
  scheduler_ = std::thread([this] {
    t_on_loop_thread = true;
    SchedulerMain();
  });
  completer_ = std::thread([this] {
    t_on_loop_thread = true;
    CompletionMain();
  });
}

EngineLoop::~EngineLoop() { Shutdown(); }

LoopRequest::~LoopRequest() {
  wire::RecycleIntBuffer(std::move(job.token_ids));
  wire::RecycleIntBuffer(std::move(job.cu_seqlens));
  wire::RecycleByteBuffer(std::move(result.data));
}

StatusOr<RequestHandle> EngineLoop::Submit(EmbedJob job, EmbedCallback done) {
  // The record and its control block in one recycled block (common/recycler.h).
  auto r = std::allocate_shared<LoopRequest>(RecyclingAllocator<LoopRequest>());
  const int n = job.num_seqs(), rows = job.num_rows();
  r->tokens = job.token_ids.size();
  r->unresolved = n;
  r->result.format = job.format;
  SizeResult(rows, &r->result);
  r->job = std::move(job);
  r->done = std::move(done);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Unavailable("server is shutting down");
    if (r->tokens > options_.max_queue_tokens) {
      return InvalidArgument("token_ids: request has " + std::to_string(r->tokens) +
                             " tokens, more than the server's whole queue (max_queue_tokens=" +
                             std::to_string(options_.max_queue_tokens) + "); split it");
    }
    if (queue_requests_ + 1 > options_.max_queue_requests ||
        queue_tokens_ + r->tokens > options_.max_queue_tokens) {
      metrics_->requests_rejected.fetch_add(1, std::memory_order_relaxed);
      return ResourceExhausted("server queue is full (" + std::to_string(queue_requests_) +
                               " requests, " + std::to_string(queue_tokens_) +
                               " tokens queued; limits " +
                               std::to_string(options_.max_queue_requests) + " requests, " +
                               std::to_string(options_.max_queue_tokens) + " tokens); retry later");
    }
    ++queue_requests_;
    queue_tokens_ += r->tokens;
    r->admitted = Clock::now();
    for (int s = 0; s < n; ++s) pool_.push_back({r, s});
  }
  wakeups_.fetch_add(1, std::memory_order_release);
  sched_cv_.notify_one();
  return r;
}

void EngineLoop::Cancel(const RequestHandle& request, const Status& why) {
  if (!request) return;
  Complete(*request, why);
  // Its sequences may sit anywhere in the pool: have the scheduler sweep all of it now, so the
  // queue budget is released even while the engine is busy. Set under the lock so the wake-up
  // cannot be lost.
  {
    std::lock_guard<std::mutex> lock(mu_);
    sweep_all_.store(true);
  }
  wakeups_.fetch_add(1, std::memory_order_release);
  sched_cv_.notify_one();
}

void EngineLoop::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wakeups_.fetch_add(1, std::memory_order_release);
  sched_cv_.notify_all();
  done_cv_.notify_all();
  if (scheduler_.joinable()) scheduler_.join();
  if (completer_.joinable()) completer_.join();
}

std::map<std::string, double> EngineLoop::EngineStats() const {
  std::lock_guard<std::mutex> lock(engine_stats_mu_);
  return engine_stats_;
}

QueueGauges EngineLoop::Gauges() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {queue_requests_, queue_tokens_, static_cast<int>(pool_.size()), inflight_count_};
}

void EngineLoop::Complete(LoopRequest& r, const Status& status) {
  if (r.finished.exchange(true)) return;
  const auto now = Clock::now();
  r.result.total_us = MicrosSince(r.admitted, now);
  r.result.queue_us = std::max<int64_t>(0, r.queue_us.load());
  switch (status.code()) {
    case StatusCode::kOk:
      metrics_->requests_ok.fetch_add(1);
      break;
    case StatusCode::kCancelled:
      metrics_->requests_cancelled.fetch_add(1);
      break;
    case StatusCode::kDeadlineExceeded:
      metrics_->requests_expired.fetch_add(1);
      break;
    default:
      metrics_->requests_failed.fetch_add(1);
      break;
  }
  if (status.ok()) metrics_->request_latency_s.Observe(r.result.total_us * 1e-6);
  // Moving the callback out drops whatever it captured once it has run.
  EmbedCallback done = std::move(r.done);
  done(status, &r.result);
}

bool EngineLoop::ResolveLocked(LoopRequest& r, int n) {
  r.unresolved -= n;
  if (r.unresolved > 0) return false;
  --queue_requests_;
  queue_tokens_ -= r.tokens;
  return true;
}

void EngineLoop::DropDeadLocked(Clock::time_point now, std::vector<RequestHandle>* expired) {
  auto drop = [&](const Entry& e) {
    LoopRequest& r = *e.request;
    if (!r.finished.load()) {
      if (now < r.job.deadline) return false;
      if (expired->empty() || expired->back() != e.request) expired->push_back(e.request);
    }
    ResolveLocked(r, 1);
    return true;
  };
  // Usually only the head matters: the scheduler looks at no more than max_batch_seqs entries,
  // and anything dead further back is caught when it gets there, still before it runs. A
  // cancellation asks for a full sweep so its queue budget is released promptly; gRPC turns an
  // expired deadline into a cancellation too.
  const bool full = sweep_all_.exchange(false);
  const size_t window = static_cast<size_t>(std::max(1, options_.limits.max_batch_seqs));
  for (;;) {
    const auto end = pool_.begin() + (full ? pool_.size() : std::min(pool_.size(), window));
    const auto kept_end = std::remove_if(pool_.begin(), end, drop);
    const size_t removed = end - kept_end;
    pool_.erase(kept_end, end);
    if (removed > 0) metrics_->sequences_dropped.fetch_add(removed);
    if (full || removed == 0) break;  // else refill the window and look again
  }
}

void EngineLoop::SchedulerMain() {
  std::vector<PendingSeq> window;
  std::vector<RequestHandle> expired;
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [&] {
    return (stopping_ && pool_.empty()) || sweep_all_.load() ||
           (!pool_.empty() && inflight_count_ < options_.max_inflight_batches);
  };
  for (;;) {
    if (!ready() && options_.idle_spin_us > 0) {
      // Poll (without the lock) for notifications before paying for a sleep and a wake-up; a
      // notification that does not make the scheduler ready (a batch collected while the pool
      // is empty) keeps it polling until the budget is spent.
      const auto until = Clock::now() + std::chrono::microseconds(options_.idle_spin_us);
      while (!ready() && Clock::now() < until) {
        const uint64_t seen = wakeups_.load(std::memory_order_acquire);
        lock.unlock();
        while (wakeups_.load(std::memory_order_acquire) == seen && Clock::now() < until) {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
        }
        lock.lock();
      }
    }
    sched_cv_.wait(lock, ready);
    expired.clear();
    DropDeadLocked(Clock::now(), &expired);
    if (!expired.empty()) {
      lock.unlock();
      for (auto& r : expired)
        Complete(*r,
                 Status(StatusCode::kDeadlineExceeded, "deadline expired before the request ran"));
      lock.lock();
      continue;  // the pool may have changed while unlocked
    }
    if (pool_.empty()) {
      if (stopping_) break;
      continue;
    }
    if (inflight_count_ >= options_.max_inflight_batches) continue;  // woken only to sweep
    // The scheduler needs at most max_batch_seqs candidates from the head of the pool.
    const size_t n =
        std::min(pool_.size(), static_cast<size_t>(std::max(1, options_.limits.max_batch_seqs)));
    window.clear();
    for (size_t i = 0; i < n; ++i) {
      const Entry& e = pool_[i];
      const auto& cu = e.request->job.cu_seqlens;
      window.push_back({reinterpret_cast<uintptr_t>(e.request.get()), e.seq,
                        cu[e.seq + 1] - cu[e.seq], e.request->job.rows_of(e.seq)});
    }
    const BatchPlan plan = ScheduleNextBatch(window, options_.limits);
    HoldInput hold{inflight_count_, 0, plan.num_seqs < static_cast<int>(pool_.size()),
                   stopping_ ? -1.0 : options_.batch_hold_lead_us};
    if (ns_per_token_ > 0) hold.engine_busy_us = MicrosSince(Clock::now(), engine_free_at_);
    if (const double us = HoldMicros(hold); us > 0) {
      // Until then, or until anything changes (an arrival, a collected batch, a cancellation).
      const uint64_t seen = wakeups_.load(std::memory_order_acquire);
      sched_cv_.wait_for(lock, std::chrono::microseconds(static_cast<int64_t>(us)), [&] {
        return wakeups_.load(std::memory_order_acquire) != seen || stopping_ || sweep_all_.load();
      });
      continue;
    }
    Inflight item;
    item.tokens = plan.num_tokens;
    if (!spare_entries_.empty()) {  // a collected batch's list, with its capacity
      item.entries = std::move(spare_entries_.back());
      spare_entries_.pop_back();
    }
    item.entries.assign(std::make_move_iterator(pool_.begin()),
                        std::make_move_iterator(pool_.begin() + plan.num_seqs));
    pool_.erase(pool_.begin(), pool_.begin() + plan.num_seqs);
    ++inflight_count_;
    lock.unlock();

    // Assemble and enqueue outside the lock: handlers keep admitting meanwhile.
    AssembleBatch(item.entries, plan.num_tokens, &batch_);
    metrics_->batches.fetch_add(1);
    metrics_->sequences.fetch_add(plan.num_seqs);
    metrics_->tokens.fetch_add(plan.num_tokens);
    metrics_->batch_tokens.Observe(plan.num_tokens);
    metrics_->batch_sequences.Observe(plan.num_seqs);
    item.submitted = Clock::now();
    auto step = engine_->Step(batch_);
    // An enqueue failure travels the same path as a device failure: the completion thread
    // fails the batch's requests, in order.
    item.handle =
        step.ok() ? std::move(step).value() : std::make_unique<ReadyEmbeddings>(step.status());
    if (const auto t = Clock::now(); t - engine_stats_at_ >= std::chrono::milliseconds(50)) {
      engine_stats_at_ = t;
      auto st = engine_->Stats();
      std::lock_guard<std::mutex> stats_lock(engine_stats_mu_);
      engine_stats_ = std::move(st);
    }
    lock.lock();
    inflight_tokens_ += item.tokens;
    engine_free_at_ = std::max(engine_free_at_, item.submitted) +
                      std::chrono::nanoseconds(static_cast<int64_t>(ns_per_token_ * item.tokens));
    inflight_.push_back(std::move(item));
    done_cv_.notify_one();
  }
  scheduler_done_ = true;
  done_cv_.notify_all();
}

void EngineLoop::CompletionMain() {
  std::vector<RequestHandle> finished;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    done_cv_.wait(lock, [&] { return !inflight_.empty() || scheduler_done_; });
    if (inflight_.empty()) break;  // the scheduler has finished and everything is collected
    Inflight item = std::move(inflight_.front());
    inflight_.pop_front();
    lock.unlock();

    StatusOr<Embeddings> out = item.handle->Wait();  // the only place the loop waits on the engine
    const auto now = Clock::now();
    metrics_->step_latency_s.Observe(std::chrono::duration<double>(now - item.submitted).count());
    Status status = out.status();
    int want_rows = 0;
    for (const Entry& e : item.entries) want_rows += e.request->job.rows_of(e.seq);
    if (status.ok() && out->rows != want_rows) {
      status = Internal("engine returned " + std::to_string(out->rows) + " rows for a batch of " +
                        std::to_string(item.entries.size()) + " sequences (" +
                        std::to_string(want_rows) + " rows)");
    }
    if (!status.ok()) {
      Log("error", "engine batch failed",
          {{"sequences", std::to_string(item.entries.size())}, {"error", status.ToString()}});
    }
    // Traced requests get an "engine step" span per batch they ran in (one per request even when
    // several of its sequences shared the batch).
    const LoopRequest* last_traced = nullptr;
    for (size_t i = 0, out_row = 0; i < item.entries.size();
         out_row += item.entries[i].request->job.rows_of(item.entries[i].seq), ++i) {
      LoopRequest& r = *item.entries[i].request;
      if (r.job.trace.valid() && &r != last_traced) {
        last_traced = &r;
        trace::RecordChild("engine step", r.job.trace, trace::ToUnixNs(item.submitted),
                           trace::ToUnixNs(now),
                           {{"petal.batch.sequences", static_cast<int64_t>(item.entries.size())},
                            {"petal.batch.tokens", item.tokens}});
      }
      if (r.finished.load()) continue;  // cancelled while running: nothing to deliver
      if (!status.ok()) {
        Complete(r, status.WithContext("engine"));
        continue;
      }
      if (now >= r.job.deadline) {
        Complete(r, Status(StatusCode::kDeadlineExceeded, "deadline expired while running"));
        continue;
      }
      const int seq = item.entries[i].seq;
      StoreRows(*out, static_cast<int>(out_row), r.job.first_row(seq), r.job.rows_of(seq),
                &r.result);
    }
    if (out.ok()) RecycleRowBuffer(std::move(out->data));  // the rows are stored: keep the buffer
    finished.clear();
    lock.lock();
    for (const Entry& e : item.entries) {
      if (ResolveLocked(*e.request, 1)) finished.push_back(e.request);
    }
    --inflight_count_;
    // The batch ran from its submission or the previous collection, whichever came later.
    const double ran_ns =
        std::chrono::duration<double, std::nano>(now - std::max(item.submitted, last_collected_))
            .count();
    last_collected_ = now;
    inflight_tokens_ -= item.tokens;
    if (status.ok() && item.tokens >= 64) {
      const double per = ran_ns / static_cast<double>(item.tokens);
      // Quick to come down, slow to go up: an estimate too low only launches a batch early (as
      // without holding); one too high (a first use that captured a graph, say) would hold the
      // next batches until their predecessors are collected, idling the engine between them.
      const double a = per < ns_per_token_ ? 0.5 : 0.1;
      ns_per_token_ = ns_per_token_ > 0 ? (1 - a) * ns_per_token_ + a * per : per;
    }
    engine_free_at_ =
        now + std::chrono::nanoseconds(static_cast<int64_t>(ns_per_token_ * inflight_tokens_));
    wakeups_.fetch_add(1, std::memory_order_release);
    sched_cv_.notify_one();
    lock.unlock();
    for (auto& r : finished) Complete(*r, Status::Ok());  // no-op for requests already completed
    finished.clear();
    item.entries.clear();
    lock.lock();
    if (spare_entries_.size() < 4) spare_entries_.push_back(std::move(item.entries));
  }
}

}  // namespace petal::server
