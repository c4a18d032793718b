// The batch scheduler as a pure function: from the sequences waiting to run (in arrival order)
// and the batch limits, how many of them form the next batch.
//
// Policy: strict first-come-first-served over sequences. The next batch is always a prefix of
// the pending list, grown while it stays within max_batch_tokens, max_batch_seqs and
// max_batch_rows; a sequence
// longer than the whole token budget runs in a batch of its own. Because the head of the list
// is always taken, nothing starves, and a request's sequences may end up spread over several
// consecutive batches. Latency grows with tokens, not sequences (docs/server.md), so the token
// budget is the main knob. Thread-safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <span>

namespace petal::server {

// One sequence waiting to run.
struct PendingSeq {
  uint64_t request_id = 0;
  int seq_index = 0;  // position within its request
  int length = 0;     // tokens, >= 1
  int rows = 1;       // output rows: 1, or its pooling spans
};

struct SchedulerLimits {
  int max_batch_tokens = 16384;
  int max_batch_seqs = 512;
  // Output rows per batch (a sequence is one row, or one per pooling span): bounds the engine's
  // result buffers (CudaEngineOptions::max_rows).
  int max_batch_rows = 2048;
};

struct BatchPlan {
  int num_seqs = 0;    // the batch is pending[0, num_seqs)
  int num_tokens = 0;  // sum of their lengths
};

// The next batch to run from `pending` (arrival order). Empty only if `pending` is empty.
BatchPlan ScheduleNextBatch(std::span<const PendingSeq> pending, const SchedulerLimits& limits);

// Holding a partial batch back. While the engine still has batches to run, launching the next
// one at once with the few sequences that have arrived splits the same work into more, smaller
// batches, each paying the engine's per-batch cost (16 clients of 511 tokens against a GPU-like
// cost model: 92% of the engine's rate, 95% with holding). Holding it until the queued work is
// about to run out lets it fill, and costs nothing while the engine is busy anyway.
struct HoldInput {
  int inflight_batches = 0;   // enqueued on the engine, not yet collected
  double engine_busy_us = 0;  // estimated engine time left for them (<= 0: none, or unknown)
  bool batch_full = false;    // the next batch stopped at a limit (more is waiting than fits)
  double lead_us = 0;         // launch this long before the engine runs out; < 0: never hold
};
// Microseconds to hold the next batch (then decide again); 0: launch it now. Never holds with
// nothing in flight (a lone request goes at once), a full batch, or under lead_us of work left.
double HoldMicros(const HoldInput& in);

}  // namespace petal::server
