// Unit and randomized property tests for the pure batch scheduler; no engine involved.
#include "server/scheduler.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace petal::server {
namespace {

std::vector<PendingSeq> Seqs(std::initializer_list<int> lengths) {
  std::vector<PendingSeq> v;
  int i = 0;
  for (int len : lengths) v.push_back({1, i++, len});
  return v;
}

TEST(Scheduler, EmptyPendingGivesEmptyBatch) {
  BatchPlan p = ScheduleNextBatch({}, {512, 8});
  EXPECT_EQ(p.num_seqs, 0);
  EXPECT_EQ(p.num_tokens, 0);
}

TEST(Scheduler, TakesPrefixWithinTokenBudget) {
  auto s = Seqs({100, 200, 200, 20});
  BatchPlan p = ScheduleNextBatch(s, {512, 8});
  EXPECT_EQ(p.num_seqs, 3);
  EXPECT_EQ(p.num_tokens, 500);
}

TEST(Scheduler, ExactBudgetFits) {
  auto s = Seqs({256, 256, 1});
  BatchPlan p = ScheduleNextBatch(s, {512, 8});
  EXPECT_EQ(p.num_seqs, 2);
  EXPECT_EQ(p.num_tokens, 512);
}

TEST(Scheduler, DoesNotSkipAheadToSmallerSequence) {
  // FCFS: the 400-token sequence blocks the 10-token one behind it from joining this batch.
  auto s = Seqs({200, 400, 10});
  BatchPlan p = ScheduleNextBatch(s, {512, 8});
  EXPECT_EQ(p.num_seqs, 1);
  EXPECT_EQ(p.num_tokens, 200);
}

TEST(Scheduler, RespectsSequenceLimit) {
  auto s = Seqs({1, 1, 1, 1, 1});
  BatchPlan p = ScheduleNextBatch(s, {512, 3});
  EXPECT_EQ(p.num_seqs, 3);
  EXPECT_EQ(p.num_tokens, 3);
}

TEST(Scheduler, RespectsRowLimitOfPoolingSpans) {
  // Rows count a sequence's pooling spans; the head runs even when its spans alone exceed it.
  std::vector<PendingSeq> s = {{1, 0, 10, 600}, {1, 1, 10, 1}, {2, 0, 10, 30}, {2, 1, 10, 1}};
  SchedulerLimits lim{512, 8, 631};
  BatchPlan p = ScheduleNextBatch(s, lim);
  EXPECT_EQ(p.num_seqs, 3);  // 600 + 1 + 30 = 631 rows; one more would pass the limit
  lim.max_batch_rows = 100;
  EXPECT_EQ(ScheduleNextBatch(s, lim).num_seqs, 1);
}

TEST(Scheduler, OversizedHeadRunsAlone) {
  auto s = Seqs({2000, 5, 5});
  BatchPlan p = ScheduleNextBatch(s, {512, 8});
  EXPECT_EQ(p.num_seqs, 1);
  EXPECT_EQ(p.num_tokens, 2000);
}

TEST(Scheduler, OversizedSequenceBehindHeadWaitsForItsOwnBatch) {
  auto s = Seqs({5, 2000, 5});
  BatchPlan p = ScheduleNextBatch(s, {512, 8});
  EXPECT_EQ(p.num_seqs, 1);
  BatchPlan q = ScheduleNextBatch(std::span(s).subspan(1), {512, 8});
  EXPECT_EQ(q.num_seqs, 1);
  EXPECT_EQ(q.num_tokens, 2000);
}

TEST(Scheduler, NonPositiveLimitsStillMakeProgress) {
  auto s = Seqs({3, 3});
  BatchPlan p = ScheduleNextBatch(s, {0, 0});
  EXPECT_EQ(p.num_seqs, 1);
}

// Property check: draining random queues batch by batch schedules every sequence exactly once,
// in arrival order, each batch within limits (or a lone oversized sequence), and maximal (the
// next sequence would not have fitted).
TEST(Scheduler, RandomizedDrainProperties) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 2000; ++trial) {
    SchedulerLimits limits{std::uniform_int_distribution<int>(1, 1024)(rng),
                           std::uniform_int_distribution<int>(1, 64)(rng)};
    const int n = std::uniform_int_distribution<int>(0, 300)(rng);
    const int max_len = std::uniform_int_distribution<int>(1, 2048)(rng);
    std::vector<PendingSeq> queue;
    int num_requests = 0;
    for (int i = 0; i < n;) {
      // Requests of 1..20 sequences, so sequences of one request are contiguous in arrival order.
      int k = std::min(n - i, std::uniform_int_distribution<int>(1, 20)(rng));
      for (int j = 0; j < k; ++j, ++i) {
        queue.push_back({static_cast<uint64_t>(num_requests), j,
                         std::uniform_int_distribution<int>(1, max_len)(rng)});
      }
      ++num_requests;
    }
    std::vector<PendingSeq> order;
    std::span<const PendingSeq> rest(queue);
    int batches = 0;
    while (!rest.empty()) {
      BatchPlan p = ScheduleNextBatch(rest, limits);
      ASSERT_GE(p.num_seqs, 1) << "no progress";
      ASSERT_LE(p.num_seqs, static_cast<int>(rest.size()));
      ASSERT_LE(p.num_seqs, limits.max_batch_seqs);
      int tokens = 0;
      for (int i = 0; i < p.num_seqs; ++i) tokens += rest[i].length;
      ASSERT_EQ(tokens, p.num_tokens);
      if (p.num_seqs > 1) {
        ASSERT_LE(p.num_tokens, limits.max_batch_tokens);
      }
      if (p.num_tokens > limits.max_batch_tokens) {
        ASSERT_EQ(p.num_seqs, 1);
      }
      if (p.num_seqs < static_cast<int>(rest.size()) && p.num_seqs < limits.max_batch_seqs) {
        ASSERT_GT(p.num_tokens + rest[p.num_seqs].length, limits.max_batch_tokens)
            << "batch could have taken the next sequence";
      }
      order.insert(order.end(), rest.begin(), rest.begin() + p.num_seqs);
      rest = rest.subspan(p.num_seqs);
      ASSERT_LE(++batches, n) << "more batches than sequences";
    }
    ASSERT_EQ(order.size(), queue.size());
    for (size_t i = 0; i < queue.size(); ++i) {
      ASSERT_EQ(order[i].request_id, queue[i].request_id);
      ASSERT_EQ(order[i].seq_index, queue[i].seq_index);
    }
  }
}

TEST(SchedulerHold, LaunchesAtOnceWithNothingInFlight) {
  EXPECT_EQ(HoldMicros({0, 5000, false, 500}), 0);  // a lone request never waits
}

TEST(SchedulerHold, HoldsAPartialBatchUntilTheLeadBeforeTheEngineRunsOut) {
  EXPECT_DOUBLE_EQ(HoldMicros({1, 17000, false, 500}), 16500);
  EXPECT_DOUBLE_EQ(HoldMicros({2, 600, false, 500}), 100);
}

TEST(SchedulerHold, LaunchesWhenFullWithinTheLeadUnknownOrDisabled) {
  EXPECT_EQ(HoldMicros({1, 17000, true, 500}), 0);  // more is waiting than one batch holds
  EXPECT_EQ(HoldMicros({1, 400, false, 500}), 0);   // the engine is about to run out
  EXPECT_EQ(HoldMicros({1, 500, false, 500}), 0);
  EXPECT_EQ(HoldMicros({1, 0, false, 500}), 0);     // no estimate yet
  EXPECT_EQ(HoldMicros({1, 17000, false, -1}), 0);  // holding turned off
}

}  // namespace
}  // namespace petal::server
