// The engine loop: the server's pool of pending sequences and the two threads that drive the
// engine.
//
// RPC handlers Submit() validated jobs; admission is bounded (tokens and requests) and answers
// at once. The *scheduler thread* repeatedly takes the next first-come-first-served batch from
// the pool (ScheduleNextBatch), drops sequences of cancelled or expired requests before they
// run, and calls Engine::Step(), which returns a handle while the device works, so batch N+1 is
// assembled and enqueued while batch N runs (up to max_inflight_batches at once). The
// *completion thread* waits on those handles in submission order, post-processes each row into
// its request's output (wire/codec.h) and completes a request when its last sequence is done.
//
// Thread-safety: Submit, Cancel, Gauges and Shutdown may be called from any thread. Each job's
// callback is called exactly once: from the completion thread, the scheduler thread, or the
// thread calling Cancel. Callbacks must not block and must not call back into the loop.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/ring_queue.h"
#include "common/status.h"
#include "engine/engine.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "trace/trace.h"
#include "wire/codec.h"
#include "wire/sparse_rows.h"

namespace petal::server {

using Clock = std::chrono::steady_clock;

// One validated request: its sequences packed end to end, and how to encode the results.
struct EmbedJob {
  std::string request_id;               // the caller's id, for logs
  std::vector<int32_t> token_ids;       // all sequences end to end
  std::vector<int32_t> cu_seqlens;      // num_seqs + 1 offsets into token_ids
  std::vector<int32_t> token_type_ids;  // empty (all 0) or one per token id
  // Optional pooling spans (EmbedRequest.spans): empty = one output row per sequence. Otherwise
  // cu_spans has num_seqs + 1 offsets into the span list and spans Batch::kSpanInts ints per
  // span: start, end relative to its sequence, and Batch::pool_spans flags; one row per span.
  std::vector<int32_t> cu_spans;
  std::vector<int32_t> spans;
  // A multi-vector model's request: one output row per token (the engine's per-token vectors),
  // no spans.
  bool per_token = false;
  // A sparse model's request: keep each row's max_active_dims largest values (0 = all).
  int32_t max_active_dims = 0;
  wire::OutputFormat format;
  Clock::time_point deadline = Clock::time_point::max();
  // The request's server span (invalid: not traced); the loop records its "queue wait" and
  // "engine step" spans as children.
  trace::SpanContext trace;
  int num_seqs() const { return static_cast<int>(cu_seqlens.size()) - 1; }
  // Output rows: one per token (per_token), one per span, or one per sequence without spans.
  const std::vector<int32_t>& row_offsets() const { return per_token ? cu_seqlens : cu_spans; }
  int num_rows() const { return row_offsets().empty() ? num_seqs() : row_offsets().back(); }
  int rows_of(int seq) const {
    return row_offsets().empty() ? 1 : row_offsets()[seq + 1] - row_offsets()[seq];
  }
  int first_row(int seq) const { return row_offsets().empty() ? seq : row_offsets()[seq]; }
};

struct EmbedResult {
  int rows = 0;
  wire::OutputFormat format;
  std::string data;  // rows * wire::BytesPerRow(format) bytes, row-major
  // format.sparse (a sparse model's rows as their non-zero entries): one per row; data empty.
  std::vector<wire::SparseRow> sparse_rows;
  std::vector<float> scales;  // one per row for int8, else empty
  int64_t queue_us = 0;       // admission to first batch submitted
  int64_t total_us = 0;       // admission to completion
};

// Called exactly once per admitted job. `result` is meaningful only when status is OK (and may
// be moved from then).
using EmbedCallback = std::function<void(const Status& status, EmbedResult* result)>;

struct LoopRequest;  // one admitted job; internal to the loop
using RequestHandle = std::shared_ptr<LoopRequest>;

struct EngineLoopOptions {
  SchedulerLimits limits;
  // Tokens of admitted, unfinished requests. A queued token costs about 12 bytes (its id, 4, in
  // the request message and again in the job, plus bookkeeping), so 2^23 tokens is ~100 MiB:
  // enough for several gateways' windows (FlowOptions::replica_window_tokens, 2^20).
  int64_t max_queue_tokens = int64_t{1} << 23;
  int max_queue_requests = 4096;  // admitted, unfinished requests
  int max_inflight_batches = 2;   // batches enqueued on the engine, not yet collected
  // Before sleeping on its condition variable, the scheduler thread polls for new work this long
  // (microseconds since it last had work), so a request arriving soon after the previous batch
  // does not pay a thread wake-up (tens of microseconds, more on virtual machines). Costs one
  // busy core for that long after each burst of work; 0 (the default) disables. `petal server`
  // turns it on for the CUDA engine.
  int idle_spin_us = 0;
  // With batches already on the engine, a partial next batch is held until about this long
  // before the engine is estimated to run out of work (HoldMicros in scheduler.h; the estimate
  // is the measured time per token of earlier batches), so it fills instead of splitting the
  // work into more, smaller batches. A lone request never waits; < 0 turns holding off.
  double batch_hold_lead_us = 500;
};

struct QueueGauges {
  int queue_requests = 0;
  int64_t queue_tokens = 0;
  int pending_sequences = 0;
  int inflight_batches = 0;
};

// True on the scheduler and completion threads of any EngineLoop (where callbacks run): code that
// may drop the last reference to a loop's owner there must not destroy it in place (a thread
// cannot join itself); LocalReplica::Create defers that to another thread.
bool OnEngineLoopThread();

class EngineLoop {
 public:
  // Starts the threads. `engine` and `metrics` must outlive the loop.
  EngineLoop(Engine* engine, EngineLoopOptions options, ServerMetrics* metrics);
  ~EngineLoop();  // Shutdown()
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Admits `job` (validated by the caller) and returns a handle for Cancel; or, without calling
  // `done`: RESOURCE_EXHAUSTED when the queue is full, INVALID_ARGUMENT when the job alone is
  // larger than the whole queue, UNAVAILABLE after Shutdown began.
  StatusOr<RequestHandle> Submit(EmbedJob job, EmbedCallback done);
  // Completes the request with `why` (CANCELLED, DEADLINE_EXCEEDED) unless already complete;
  // its sequences that have not run yet are dropped before they reach the engine.
  void Cancel(const RequestHandle& request, const Status& why);
  // Stops admitting, finishes all admitted work, joins the threads. Idempotent.
  void Shutdown();
  QueueGauges Gauges() const;
  // The engine's counters (Engine::Stats()), sampled by the scheduler thread, which is the only
  // thread allowed to touch the engine, at most every 50 ms.
  std::map<std::string, double> EngineStats() const;
  const EngineLoopOptions& options() const { return options_; }

 private:
  struct Entry {  // one sequence in the pool
    RequestHandle request;
    int seq = 0;
  };
  struct Inflight {  // one batch on the engine
    std::unique_ptr<PendingEmbeddings> handle;
    std::vector<Entry> entries;
    Clock::time_point submitted;
    int64_t tokens = 0;
  };

  void SchedulerMain();
  void CompletionMain();
  // Refills `batch` (its vectors keep their capacity) with the engine batch of `entries`
  // (num_tokens in all); records their requests' queue waits. Scheduler thread, without the
  // lock (engine_loop_batch.cc).
  void AssembleBatch(const std::vector<Entry>& entries, int num_tokens, Batch* batch);
  // Removes entries of completed or expired requests from the head of the pool (from all of it
  // after a cancellation); expired ones not yet completed are appended to `expired`, to be
  // completed outside the lock.
  void DropDeadLocked(Clock::time_point now, std::vector<RequestHandle>* expired);
  // Marks `n` sequences of `r` resolved (ran or dropped); releases its queue budget at zero.
  // Returns true if that was the request's last sequence.
  bool ResolveLocked(LoopRequest& r, int n);
  // Completes `r` with `status` unless it already was.
  void Complete(LoopRequest& r, const Status& status);

  Engine* const engine_;
  const EngineLoopOptions options_;
  ServerMetrics* const metrics_;

  mutable std::mutex mu_;
  std::condition_variable sched_cv_;  // pool non-empty, a batch slot freed, or stopping
  std::condition_variable done_cv_;   // a batch enqueued, or the scheduler finished
  std::deque<Entry> pool_;
  RingQueue<Inflight> inflight_;                   // a deque allocated a block every few batches
  std::vector<std::vector<Entry>> spare_entries_;  // collected batches' lists, for reuse
  int inflight_count_ = 0;  // batches taken from the pool and not yet collected
  // The engine's time per token (ns, an average over collected batches; 0 until the first) and
  // when it should finish the batches it holds: HoldMicros' estimate.
  int64_t inflight_tokens_ = 0;
  double ns_per_token_ = 0;
  Clock::time_point engine_free_at_{}, last_collected_{};
  int queue_requests_ = 0;
  int64_t queue_tokens_ = 0;
  bool stopping_ = false;
  bool scheduler_done_ = false;
  std::atomic<bool> sweep_all_{false};  // a cancellation happened: sweep the whole pool
  std::atomic<uint64_t> wakeups_{0};    // bumped by everything that notifies sched_cv_

  mutable std::mutex engine_stats_mu_;
  std::map<std::string, double> engine_stats_;
  Clock::time_point engine_stats_at_{};  // scheduler thread only
  // The batch handed to Engine::Step, refilled for every step (Step copies what it needs before
  // it returns): no per-step allocations once it has grown. Scheduler thread only.
  Batch batch_;

  std::thread scheduler_;
  std::thread completer_;
};

}  // namespace petal::server
