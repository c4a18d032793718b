// The engine loop refills one Batch for every step (engine_loop_batch.cc): a batch with pooling
// spans must leave nothing behind for the next batch, whose sequences then get their ordinary
// rows. FakeEngine rows are checked against FakeEngine::Reference. Also the FakeEngine's own
// batch history, which a long-running fake server bounds.
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <vector>

#include "server/engine_loop.h"
#include "server/fake_engine.h"

namespace petal::server {
namespace {

EmbedJob Job(const std::vector<std::vector<int32_t>>& seqs, int dims) {
  EmbedJob job;
  job.cu_seqlens.push_back(0);
  for (const auto& s : seqs) {
    job.token_ids.insert(job.token_ids.end(), s.begin(), s.end());
    job.cu_seqlens.push_back(static_cast<int32_t>(job.token_ids.size()));
  }
  job.format = {dims, false, wire::OutputDType::kFloat32};
  return job;
}

// Runs `job` alone and returns its float rows (empty on failure, with the status in `st`).
std::vector<float> RunAlone(EngineLoop& loop, EmbedJob job, Status* st) {
  auto p = std::make_shared<std::promise<std::vector<float>>>();
  auto f = p->get_future();
  auto h = loop.Submit(std::move(job), [p, st](const Status& s, EmbedResult* r) {
    *st = s;
    std::vector<float> rows;
    if (s.ok()) {
      rows.resize(r->data.size() / sizeof(float));
      std::memcpy(rows.data(), r->data.data(), r->data.size());
    }
    p->set_value(std::move(rows));
  });
  if (!h.ok()) {
    *st = h.status();
    return {};
  }
  return f.get();
}

std::vector<float> Want(const std::vector<std::vector<int32_t>>& seqs, const FakeEngineOptions& o) {
  std::vector<float> out;
  for (const auto& s : seqs) {
    const auto row = FakeEngine::Reference(s, o);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

TEST(EngineLoopBatch, ABatchLeavesNothingBehindForTheNext) {
  FakeEngineOptions fo;
  FakeEngine engine(fo);
  ServerMetrics metrics;
  EngineLoop loop(&engine, EngineLoopOptions{}, &metrics);
  FakeEngineOptions raw = fo;  // span rows: pooled, not normalised (the spans' flags say so)
  raw.normalize = false;
  for (int round = 0; round < 3; ++round) {
    EmbedJob spanned = Job({{1, 2, 3, 4, 5, 6, 7, 8}}, fo.hidden_size);
    spanned.cu_spans = {0, 2};
    spanned.spans = {0, 3, 0, 3, 8, 0};  // [start, end, flags]: [0, 3) and [3, 8)
    Status st;
    EXPECT_EQ(RunAlone(loop, std::move(spanned), &st), Want({{1, 2, 3}, {4, 5, 6, 7, 8}}, raw));
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(RunAlone(loop, Job({{11, 12}, {13}}, fo.hidden_size), &st),
              Want({{11, 12}, {13}}, fo));
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  EXPECT_EQ(engine.batches().size(), 6u);  // each job ran in a batch of its own
}

// A long-running `petal serve --fake-engine` must not keep every batch it ran.
TEST(FakeEngine, KeepsABoundedHistoryAndCountsEveryBatch) {
  FakeEngine engine;
  const Batch batch = Batch::FromSequences({{1, 2, 3}});
  const size_t steps = 2 * FakeEngine::kKeptBatches + 10;
  for (size_t i = 0; i < steps; ++i) {
    auto pending = engine.Step(batch);
    ASSERT_TRUE(pending.ok()) << pending.status().ToString();
    ASSERT_TRUE((*pending)->Wait().ok());
  }
  const size_t kept = engine.batches().size();
  EXPECT_GE(kept, FakeEngine::kKeptBatches);
  EXPECT_LE(kept, 2 * FakeEngine::kKeptBatches);
  EXPECT_EQ(engine.Stats().at("batches"), static_cast<double>(steps));
}

}  // namespace
}  // namespace petal::server
