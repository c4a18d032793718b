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

}  // namespace petal::server
