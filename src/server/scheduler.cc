#include "server/scheduler.h"

#include <algorithm>

namespace petal::server {

BatchPlan ScheduleNextBatch(std::span<const PendingSeq> pending, const SchedulerLimits& limits) {
  BatchPlan plan;
  if (pending.empty()) return plan;
  // Limits below 1 would make no progress; treat them as 1 so the head always runs.
  const int max_seqs = std::max(1, limits.max_batch_seqs);
  const int max_tokens = std::max(1, limits.max_batch_tokens);
  const int max_rows = std::max(1, limits.max_batch_rows);
  int rows = pending[0].rows;
  // The head always runs, even when it alone exceeds the token budget (a batch of its own).
  plan.num_seqs = 1;
  plan.num_tokens = pending[0].length;
  if (plan.num_tokens >= max_tokens) return plan;
  for (size_t i = 1; i < pending.size() && plan.num_seqs < max_seqs; ++i) {
    // Stop at the first sequence that does not fit rather than skipping ahead to a smaller one:
    // skipping would reorder work and could starve long sequences.
    if (plan.num_tokens + pending[i].length > max_tokens) break;
    if (rows + pending[i].rows > max_rows) break;
    plan.num_tokens += pending[i].length;
    rows += pending[i].rows;
    ++plan.num_seqs;
  }
  return plan;
}

double HoldMicros(const HoldInput& in) {
  if (in.lead_us < 0 || in.inflight_batches <= 0 || in.batch_full) return 0;
  return in.engine_busy_us > in.lead_us ? in.engine_busy_us - in.lead_us : 0;
}

}  // namespace petal::server
