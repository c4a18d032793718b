// The engine loop holding a partial batch back (EngineLoopOptions::batch_hold_lead_us) with the
// FakeEngine's simulated batch time: while one batch runs, sequences arriving one by one join one
// next batch instead of the first of them running alone; with holding off, it does run alone.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "server/engine_loop.h"
#include "server/fake_engine.h"

namespace petal::server {
namespace {

using namespace std::chrono_literals;

EmbedJob Job(int first_token, int len) {
  EmbedJob job;
  job.cu_seqlens = {0, len};
  for (int i = 0; i < len; ++i) job.token_ids.push_back((first_token + i) % 1000);
  job.format = {32, false, wire::OutputDType::kFloat32};
  return job;
}

std::shared_future<Status> Run(EngineLoop& loop, EmbedJob job) {
  auto p = std::make_shared<std::promise<Status>>();
  auto f = p->get_future().share();
  auto h = loop.Submit(std::move(job), [p](const Status& s, EmbedResult*) { p->set_value(s); });
  if (!h.ok()) p->set_value(h.status());
  return f;
}

// Batch sizes (sequences) after: one 100-token request alone (the loop learns the time per
// token), then one that starts a batch of its own, then four more, 5 ms apart, while it runs
// (each simulated batch takes 200 ms: the four arrive well inside the hold window even when a
// sanitizer slows every submission; at 40 ms a TSan run once saw the last one miss it).
std::vector<int> BatchSizes(double lead_us) {
  FakeEngineOptions fo;
  fo.per_batch = 200ms;
  FakeEngine engine(fo);
  ServerMetrics metrics;
  EngineLoopOptions lo;
  lo.batch_hold_lead_us = lead_us;
  EngineLoop loop(&engine, lo, &metrics);
  EXPECT_TRUE(Run(loop, Job(0, 100)).get().ok());
  std::vector<std::shared_future<Status>> runs = {Run(loop, Job(1, 100))};
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(5ms);
    runs.push_back(Run(loop, Job(2 + i, 100)));
  }
  for (auto& r : runs) EXPECT_TRUE(r.get().ok());
  std::vector<int> sizes;
  for (const FakeBatchRecord& b : engine.batches()) sizes.push_back(b.num_seqs);
  return sizes;
}

TEST(EngineLoopHold, LateArrivalsFillOneBatchInsteadOfRunningAlone) {
  EXPECT_EQ(BatchSizes(5000), (std::vector<int>{1, 1, 4}));
}

TEST(EngineLoopHold, WithHoldingOffTheFirstLateArrivalRunsAlone) {
  const std::vector<int> sizes = BatchSizes(-1);
  ASSERT_GE(sizes.size(), 4u);
  EXPECT_EQ(sizes[2], 1);  // enqueued at once as the second batch in flight
}

}  // namespace
}  // namespace petal::server
