// The long-document plans (span_plan.h) on random chunkings: every window fits the model, every
// chunk token is pooled exactly once, from a window in which it is farthest from an edge (the
// seam rule), spans stay on their chunk's tokens, and CombineSpanRows is the token-weighted mean.
#include "gateway/span_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace petal::gateway {
namespace {

TEST(SpanPlan, OneWindowWhenTheDocumentFits) {
  const std::vector<std::vector<int32_t>> chunks = {{5, 6}, {7}, {8, 9, 10}};
  SpanPlan p = PlanLateChunks(chunks, {3}, {1}, {2}, 16, 4);
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0], (std::vector<int32_t>{1, 3, 5, 6, 7, 8, 9, 10, 2}));
  EXPECT_EQ(p.spans[0], (std::vector<uint32_t>{2, 4, 4, 5, 5, 8}));
  EXPECT_EQ(p.target, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(p.outputs, 3);
  EXPECT_EQ(p.tokens, 9);
}

TEST(SpanPlan, LateChunkWindowsFollowTheSeamRule) {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 200; ++iter) {
    const int max_len = 8 + static_cast<int>(rng() % 60);
    const std::vector<int32_t> prefix(rng() % 3, 1), suffix(rng() % 2, 2);
    std::vector<int32_t> prompt(rng() % 4);
    const int cap = WindowCapacity(max_len, int(prefix.size()), int(suffix.size()));
    const int overlap = static_cast<int>(rng() % cap);
    std::vector<std::vector<int32_t>> chunks(1 + rng() % 12);
    int32_t next = 100;  // body token ids are their body positions + 100 (prompt first)
    for (auto& t : prompt) t = next++;
    for (auto& c : chunks) {
      c.resize(1 + rng() % (2 * max_len));
      for (auto& t : c) t = next++;
    }
    const int64_t body = next - 100;
    SpanPlan p = PlanLateChunks(chunks, prompt, prefix, suffix, max_len, overlap);
    ASSERT_EQ(p.outputs, static_cast<int>(chunks.size()));
    // Window geometry: body start of each window from its first body token.
    std::vector<int> owner_count(body, 0);
    std::vector<double> weight(chunks.size(), 0);
    size_t s = 0;
    for (size_t k = 0; k < p.seqs.size(); ++k) {
      const auto& w = p.seqs[k];
      ASSERT_LE(w.size(), static_cast<size_t>(max_len));
      for (size_t i = 0; i < prefix.size(); ++i) EXPECT_EQ(w[i], 1);
      for (size_t i = 0; i < suffix.size(); ++i) EXPECT_EQ(w[w.size() - 1 - i], 2);
      const int64_t start = w[prefix.size()] - 100;  // the window's first body position
      const int64_t len = static_cast<int64_t>(w.size() - prefix.size() - suffix.size());
      for (size_t q = 0; q < p.spans[k].size(); q += 2, ++s) {
        const int target = p.target[s];
        for (uint32_t pos = p.spans[k][q]; pos < p.spans[k][q + 1]; ++pos) {
          const int32_t id = w[pos];
          ASSERT_GE(id, 100 + static_cast<int32_t>(prompt.size()));
          const int64_t t = id - 100;
          // The token is in the span's chunk.
          ASSERT_GE(id, chunks[target].front());
          ASSERT_LE(id, chunks[target].back());
          ++owner_count[t];
          // Its distance to this window's edges is the best any window offers.
          const int64_t here = std::min(t - start, start + len - 1 - t);
          int64_t best = here;
          for (const auto& w2 : p.seqs) {
            const int64_t s2 = w2[prefix.size()] - 100;
            const int64_t l2 = static_cast<int64_t>(w2.size() - prefix.size() - suffix.size());
            if (t >= s2 && t < s2 + l2) best = std::max(best, std::min(t - s2, s2 + l2 - 1 - t));
          }
          EXPECT_GE(here + 1, best) << "token " << t << " not taken near its best window";
        }
        weight[target] += p.weight[s];
      }
    }
    ASSERT_EQ(s, p.target.size());
    for (int64_t t = static_cast<int64_t>(prompt.size()); t < body; ++t)
      ASSERT_EQ(owner_count[t], 1) << "token " << t << " (iteration " << iter << ")";
    for (size_t j = 0; j < chunks.size(); ++j) EXPECT_EQ(weight[j], double(chunks[j].size()));
  }
}

TEST(SpanPlan, LongInputWindowsAndWeightedMean) {
  std::vector<int32_t> body(25);
  for (int i = 0; i < 25; ++i) body[i] = 10 + i;
  SpanPlan p = PlanLongInput(body, {1}, {2}, 12);  // 10 body tokens per window: 10, 10, 5
  ASSERT_EQ(p.seqs.size(), 3u);
  EXPECT_EQ(p.seqs[2], (std::vector<int32_t>{1, 30, 31, 32, 33, 34, 2}));
  EXPECT_EQ(p.spans[2], (std::vector<uint32_t>{0, 7}));
  EXPECT_EQ(p.weight, (std::vector<float>{10, 10, 5}));
  const float rows[] = {1, 0, 0, 1, 4, 4};  // [3 spans, 2 dims]
  const auto out = CombineSpanRows(p, rows, 2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FLOAT_EQ(out[0], (10 * 1 + 10 * 0 + 5 * 4) / 25.f);
  EXPECT_FLOAT_EQ(out[1], (10 * 0 + 10 * 1 + 5 * 4) / 25.f);
  SpanPlan two = p;
  two.Append(p);
  EXPECT_EQ(two.outputs, 2);
  EXPECT_EQ(two.target.back(), 1);
}

}  // namespace
}  // namespace petal::gateway
