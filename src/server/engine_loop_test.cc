// Tests for the engine loop with the FakeEngine: results routed to the right request and row,
// batching limits, overlap, backpressure, cancellation, deadlines, engine failures, drain.
#include "server/engine_loop.h"

#include <gtest/gtest.h>

#include <future>
#include <random>

#include "engine/cuda/cuda_engine.h"
#include "server/fake_engine.h"

namespace petal::server {
namespace {

using namespace std::chrono_literals;

struct Outcome {
  Status status;
  EmbedResult result;
};

// Submits a job and returns a future for its outcome (or the Submit error at once).
struct Submitted {
  StatusOr<RequestHandle> handle;
  std::shared_future<Outcome> outcome;
};

EmbedJob MakeJob(const std::vector<std::vector<int32_t>>& seqs, wire::OutputFormat f) {
  EmbedJob job;
  job.cu_seqlens.push_back(0);
  for (const auto& s : seqs) {
    job.token_ids.insert(job.token_ids.end(), s.begin(), s.end());
    job.cu_seqlens.push_back(static_cast<int32_t>(job.token_ids.size()));
  }
  job.format = f;
  return job;
}

Submitted Submit(EngineLoop& loop, EmbedJob job) {
  auto promise = std::make_shared<std::promise<Outcome>>();
  Submitted s{Status(StatusCode::kUnknown, "unset"), promise->get_future().share()};
  s.handle = loop.Submit(std::move(job), [promise](const Status& st, EmbedResult* r) {
    promise->set_value({st, st.ok() ? std::move(*r) : EmbedResult{}});
  });
  return s;
}

std::vector<std::vector<int32_t>> RandomSeqs(std::mt19937& rng, int n, int max_len, int vocab) {
  std::vector<std::vector<int32_t>> seqs(n);
  for (auto& s : seqs) {
    s.resize(std::uniform_int_distribution<int>(1, max_len)(rng));
    for (auto& t : s) t = std::uniform_int_distribution<int>(0, vocab - 1)(rng);
  }
  return seqs;
}

void ExpectRows(const EmbedResult& r, const std::vector<std::vector<int32_t>>& seqs,
                const FakeEngineOptions& fo) {
  ASSERT_EQ(r.rows, static_cast<int>(seqs.size()));
  ASSERT_EQ(r.format.dtype, wire::OutputDType::kFloat32);
  for (size_t i = 0; i < seqs.size(); ++i) {
    auto want = FakeEngine::Reference(seqs[i], fo);
    const float* got = reinterpret_cast<const float*>(r.data.data()) + i * r.format.dims;
    for (int d = 0; d < r.format.dims; ++d)
      ASSERT_EQ(got[d], want[d]) << "row " << i << " dim " << d;
  }
}

TEST(EngineLoop, ManyRequestsGetTheirOwnRowsWithinLimits) {
  FakeEngineOptions fo;
  FakeEngine engine(fo);
  ServerMetrics metrics;
  EngineLoopOptions lo;
  lo.limits = {64, 5};
  EngineLoop loop(&engine, lo, &metrics);
  std::mt19937 rng(1);
  std::vector<std::vector<std::vector<int32_t>>> inputs;
  std::vector<Submitted> subs;
  for (int i = 0; i < 60; ++i) {
    inputs.push_back(
        RandomSeqs(rng, std::uniform_int_distribution<int>(1, 9)(rng), 40, fo.vocab_size));
    subs.push_back(
        Submit(loop, MakeJob(inputs.back(), {fo.hidden_size, false, wire::OutputDType::kFloat32})));
    ASSERT_TRUE(subs.back().handle.ok());
  }
  int total_seqs = 0;
  for (size_t i = 0; i < subs.size(); ++i) {
    ASSERT_EQ(subs[i].outcome.wait_for(10s), std::future_status::ready);
    const Outcome& o = subs[i].outcome.get();
    ASSERT_TRUE(o.status.ok()) << o.status.ToString();
    ExpectRows(o.result, inputs[i], fo);
    total_seqs += inputs[i].size();
  }
  int seen = 0;
  for (const auto& b : engine.batches()) {
    EXPECT_LE(b.num_seqs, 5);
    if (b.num_seqs > 1) {
      EXPECT_LE(b.num_tokens, 64);
    }
    seen += b.num_seqs;
  }
  EXPECT_EQ(seen, total_seqs);  // nothing ran twice or was lost
  EXPECT_EQ(metrics.requests_ok.load(), 60u);
  EXPECT_EQ(loop.Gauges().queue_requests, 0);
  EXPECT_EQ(loop.Gauges().queue_tokens, 0);
}

TEST(EngineLoop, BatchesFollowArrivalOrder) {
  FakeEngine engine;
  ServerMetrics metrics;
  EngineLoopOptions lo;
  lo.limits = {8, 3};
  engine.Hold();  // let everything queue first
  EngineLoop loop(&engine, lo, &metrics);
  std::vector<Submitted> subs;
  for (int i = 0; i < 10; ++i) {
    // First token encodes the arrival index; lengths 1..4.
    subs.push_back(Submit(loop, MakeJob({std::vector<int32_t>(1 + i % 4, i)},
                                        {32, false, wire::OutputDType::kFloat32})));
  }
  engine.Release();
  for (auto& s : subs) ASSERT_TRUE(s.outcome.get().status.ok());
  std::vector<int> order;
  for (const auto& b : engine.batches())
    order.insert(order.end(), b.first_tokens.begin(), b.first_tokens.end());
  ASSERT_EQ(order.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(order[i], i);
}

TEST(EngineLoop, OverlapsSubmissionWithRunningBatch) {
  // While batch 1 is held on the "device", batch 2 must already be enqueued.
  FakeEngine engine;
  ServerMetrics metrics;
  EngineLoopOptions lo;
  lo.limits = {4, 1};
  lo.max_inflight_batches = 2;
  engine.Hold();
  EngineLoop loop(&engine, lo, &metrics);
  auto a = Submit(loop, MakeJob({{1, 2}}, {32, false, wire::OutputDType::kFloat32}));
  auto b = Submit(loop, MakeJob({{3, 4}}, {32, false, wire::OutputDType::kFloat32}));
  auto c = Submit(loop, MakeJob({{5, 6}}, {32, false, wire::OutputDType::kFloat32}));
  for (int i = 0; i < 200 && engine.batches().size() < 2; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(engine.batches().size(), 2u);  // two in flight, the third waits for a slot
  EXPECT_EQ(loop.Gauges().inflight_batches, 2);
  EXPECT_EQ(loop.Gauges().pending_sequences, 1);
  engine.Release();
  EXPECT_TRUE(c.outcome.get().status.ok());
  EXPECT_EQ(engine.batches().size(), 3u);
}

// Pooling spans: a job with spans and an ordinary job share one batch; the span job gets one raw
// row per span (its tokens only), the ordinary one its usual normalised row per sequence.
TEST(EngineLoop, SpanJobsAndOrdinaryJobsShareABatch) {
  FakeEngineOptions fo;
  FakeEngine engine(fo);
  ServerMetrics metrics;
  EngineLoopOptions lo;
  lo.max_inflight_batches = 1;
  engine.Hold();
  EngineLoop loop(&engine, lo, &metrics);
  const wire::OutputFormat f{fo.hidden_size, false, wire::OutputDType::kFloat32};
  auto blocker = Submit(loop, MakeJob({{9, 9}}, f));  // batch 1, held: the next two queue
  for (int i = 0; i < 200 && engine.batches().empty(); ++i) std::this_thread::sleep_for(5ms);
  EmbedJob spanned = MakeJob({{1, 2, 3, 4, 5}, {6, 7}}, f);
  spanned.cu_spans = {0, 2, 3};
  spanned.spans = {0, 2, 0, 2, 5, 0, 0, 2, 0};
  auto a = Submit(loop, std::move(spanned));
  auto b = Submit(loop, MakeJob({{11, 12, 13}}, f));
  engine.Release();
  const Outcome ra = a.outcome.get(), rb = b.outcome.get();
  ASSERT_TRUE(ra.status.ok()) << ra.status.ToString();
  ASSERT_TRUE(rb.status.ok()) << rb.status.ToString();
  ASSERT_EQ(engine.batches().size(), 2u);
  EXPECT_EQ(engine.batches()[1].num_seqs, 3);  // both jobs in one batch
  FakeEngineOptions raw = fo;
  raw.normalize = false;
  ExpectRows(ra.result, {{1, 2}, {3, 4, 5}, {6, 7}}, raw);
  ExpectRows(rb.result, {{11, 12, 13}}, fo);
}

// Runs 8 one-sequence requests with 6 batches held in flight on an engine with `slots` result
// slots; returns how many requests failed.
int FailuresWithSixInflight(int slots) {
  FakeEngineOptions fo;
  fo.result_slots = slots;
  FakeEngine engine(fo);
  ServerMetrics metrics;
  EngineLoopOptions lo;
  lo.limits = {4, 1};
  lo.max_inflight_batches = 6;
  engine.Hold();
  EngineLoop loop(&engine, lo, &metrics);
  std::vector<Submitted> subs;
  for (int i = 0; i < 8; ++i) {
    subs.push_back(Submit(loop, MakeJob({{i + 1, 2}}, {32, false, wire::OutputDType::kFloat32})));
  }
  for (int i = 0; i < 400 && loop.Gauges().inflight_batches < 6; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(loop.Gauges().inflight_batches, 6);
  engine.Release();
  int failed = 0;
  for (auto& s : subs) failed += s.outcome.get().status.ok() ? 0 : 1;
  return failed;
}

TEST(EngineLoop, ResultSlotsSizedFromMaxInflightBatches) {
  // The CUDA engine's old fixed 4 slots under --max-inflight-batches 6 failed requests with
  // RESOURCE_EXHAUSTED; ResultSlotsFor (what `petal server` sizes the ring with) does not.
  EXPECT_GT(FailuresWithSixInflight(4), 0);
  EXPECT_EQ(FailuresWithSixInflight(ResultSlotsFor(6)), 0);
  EXPECT_EQ(ResultSlotsFor(2), 4);
  EXPECT_EQ(ResultSlotsFor(6), 6);
}

TEST(EngineLoop, QueueLimitsRejectAtOnceWithoutHarmingAdmittedWork) {
  FakeEngine engine;
  ServerMetrics metrics;
  EngineLoopOptions lo;
  lo.max_queue_requests = 3;
  lo.max_queue_tokens = 100;
  engine.Hold();
  EngineLoop loop(&engine, lo, &metrics);
  wire::OutputFormat f{32, false, wire::OutputDType::kFloat32};
  auto a = Submit(loop, MakeJob({std::vector<int32_t>(40, 7)}, f));
  auto b = Submit(loop, MakeJob({std::vector<int32_t>(40, 8)}, f));
  ASSERT_TRUE(a.handle.ok() && b.handle.ok());
  auto too_many_tokens = Submit(loop, MakeJob({std::vector<int32_t>(30, 9)}, f));
  ASSERT_FALSE(too_many_tokens.handle.ok());
  EXPECT_EQ(too_many_tokens.handle.status().code(), StatusCode::kResourceExhausted);
  auto c = Submit(loop, MakeJob({{1}}, f));
  ASSERT_TRUE(c.handle.ok());
  auto too_many_requests = Submit(loop, MakeJob({{2}}, f));
  EXPECT_EQ(too_many_requests.handle.status().code(), StatusCode::kResourceExhausted);
  auto never_fits = Submit(loop, MakeJob({std::vector<int32_t>(101, 1)}, f));
  EXPECT_EQ(never_fits.handle.status().code(), StatusCode::kInvalidArgument);
  engine.Release();
  for (auto* s : {&a, &b, &c}) ASSERT_TRUE(s->outcome.get().status.ok());
  EXPECT_EQ(metrics.requests_rejected.load(), 2u);
  // Capacity is back once the work is done.
  auto d = Submit(loop, MakeJob({std::vector<int32_t>(90, 3)}, f));
  ASSERT_TRUE(d.handle.ok());
  EXPECT_TRUE(d.outcome.get().status.ok());
}

TEST(EngineLoop, CancelledRequestIsAnsweredAtOnceAndNeverRuns) {
  FakeEngine engine;
  ServerMetrics metrics;
  EngineLoopOptions lo;
  lo.limits = {4, 1};
  lo.max_inflight_batches = 1;
  engine.Hold();
  EngineLoop loop(&engine, lo, &metrics);
  wire::OutputFormat f{32, false, wire::OutputDType::kFloat32};
  auto first = Submit(loop, MakeJob({{100}}, f));
  for (int i = 0; i < 200 && engine.batches().empty(); ++i) std::this_thread::sleep_for(5ms);
  auto victim = Submit(loop, MakeJob({{200}, {201}, {202}}, f));
  auto after = Submit(loop, MakeJob({{300}}, f));
  loop.Cancel(*victim.handle, Status(StatusCode::kCancelled, "client cancelled"));
  ASSERT_EQ(victim.outcome.wait_for(1s), std::future_status::ready);
  EXPECT_EQ(victim.outcome.get().status.code(), StatusCode::kCancelled);
  engine.Release();
  EXPECT_TRUE(after.outcome.get().status.ok());
  EXPECT_TRUE(first.outcome.get().status.ok());
  for (const auto& b : engine.batches()) {
    for (int t : b.first_tokens) EXPECT_TRUE(t < 200 || t > 202) << "cancelled sequence ran";
  }
  EXPECT_EQ(metrics.sequences_dropped.load(), 3u);
  EXPECT_EQ(metrics.requests_cancelled.load(), 1u);
  EXPECT_EQ(loop.Gauges().queue_requests, 0);
}

TEST(EngineLoop, ExpiredRequestIsDroppedBeforeRunning) {
  FakeEngine engine;
  ServerMetrics metrics;
  EngineLoopOptions lo;
  lo.max_inflight_batches = 1;
  engine.Hold();
  EngineLoop loop(&engine, lo, &metrics);
  wire::OutputFormat f{32, false, wire::OutputDType::kFloat32};
  auto first = Submit(loop, MakeJob({{100}}, f));
  for (int i = 0; i < 200 && engine.batches().empty(); ++i) std::this_thread::sleep_for(5ms);
  EmbedJob job = MakeJob({{200}}, f);
  job.deadline = Clock::now() + 20ms;
  auto expiring = Submit(loop, std::move(job));
  std::this_thread::sleep_for(40ms);
  engine.Release();
  EXPECT_EQ(expiring.outcome.get().status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(first.outcome.get().status.ok());
  for (const auto& b : engine.batches()) EXPECT_NE(b.first_tokens[0], 200);
  EXPECT_EQ(metrics.requests_expired.load(), 1u);
}

TEST(EngineLoop, ExpiredRequestDeepInTheQueueNeverRuns) {
  FakeEngine engine;
  ServerMetrics metrics;
  EngineLoopOptions lo;
  lo.limits = {64, 1};  // the scheduler looks at one entry at a time
  lo.max_inflight_batches = 1;
  engine.Hold();
  EngineLoop loop(&engine, lo, &metrics);
  wire::OutputFormat f{32, false, wire::OutputDType::kFloat32};
  std::vector<Submitted> before;
  for (int i = 0; i < 4; ++i) before.push_back(Submit(loop, MakeJob({{100 + i}}, f)));
  EmbedJob job = MakeJob({{200}, {201}}, f);
  job.deadline = Clock::now() + 20ms;
  auto expiring = Submit(loop, std::move(job));
  auto after = Submit(loop, MakeJob({{300}}, f));
  std::this_thread::sleep_for(40ms);
  engine.Release();
  EXPECT_EQ(expiring.outcome.get().status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(after.outcome.get().status.ok());
  for (auto& s : before) EXPECT_TRUE(s.outcome.get().status.ok());
  for (const auto& b : engine.batches()) {
    EXPECT_NE(b.first_tokens[0], 200);
    EXPECT_NE(b.first_tokens[0], 201);
  }
  EXPECT_EQ(metrics.sequences_dropped.load(), 2u);
}

TEST(EngineLoop, CancellationReleasesQueueBudgetWhileEngineIsBusy) {
  FakeEngine engine;
  ServerMetrics metrics;
  EngineLoopOptions lo;
  lo.limits = {64, 1};
  lo.max_inflight_batches = 1;
  lo.max_queue_requests = 3;
  engine.Hold();
  EngineLoop loop(&engine, lo, &metrics);
  wire::OutputFormat f{32, false, wire::OutputDType::kFloat32};
  auto a = Submit(loop, MakeJob({{1}}, f));
  auto b = Submit(loop, MakeJob({{2}}, f));
  auto victim = Submit(loop, MakeJob({{3}, {4}}, f));
  EXPECT_EQ(Submit(loop, MakeJob({{5}}, f)).handle.status().code(), StatusCode::kResourceExhausted);
  loop.Cancel(*victim.handle, Status(StatusCode::kCancelled, "client cancelled"));
  bool released = false;
  for (int i = 0; i < 200 && !released; ++i) {
    released = loop.Gauges().queue_requests == 2;
    if (!released) std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(released) << "the engine is still held, yet the budget must come back";
  auto c = Submit(loop, MakeJob({{6}}, f));
  EXPECT_TRUE(c.handle.ok());
  engine.Release();
  for (auto* s : {&a, &b, &c}) EXPECT_TRUE(s->outcome.get().status.ok());
}

TEST(EngineLoop, EngineFailureFailsOnlyThatBatch) {
  FakeEngine engine;
  ServerMetrics metrics;
  EngineLoopOptions lo;
  lo.limits = {1, 1};
  engine.Hold();
  EngineLoop loop(&engine, lo, &metrics);
  wire::OutputFormat f{32, false, wire::OutputDType::kFloat32};
  engine.FailNextSteps(1);
  auto bad = Submit(loop, MakeJob({{1}}, f));
  auto good = Submit(loop, MakeJob({{2}}, f));
  engine.Release();
  EXPECT_EQ(bad.outcome.get().status.code(), StatusCode::kInternal);
  EXPECT_TRUE(good.outcome.get().status.ok());
}

TEST(EngineLoop, ShutdownDrainsAdmittedWorkAndRefusesNew) {
  FakeEngineOptions fo;
  fo.per_batch = 2ms;
  FakeEngine engine(fo);
  ServerMetrics metrics;
  EngineLoopOptions lo;
  lo.limits = {16, 2};
  auto loop = std::make_unique<EngineLoop>(&engine, lo, &metrics);
  std::vector<Submitted> subs;
  for (int i = 0; i < 20; ++i)
    subs.push_back(Submit(*loop, MakeJob({{i + 1, 2}, {3}}, {8, true, wire::OutputDType::kInt8})));
  loop->Shutdown();
  for (auto& s : subs) {
    ASSERT_EQ(s.outcome.wait_for(0s), std::future_status::ready);
    EXPECT_TRUE(s.outcome.get().status.ok());
    EXPECT_EQ(s.outcome.get().result.scales.size(), 2u);
  }
  auto late = Submit(*loop, MakeJob({{1}}, {8, true, wire::OutputDType::kInt8}));
  EXPECT_EQ(late.handle.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace petal::server
