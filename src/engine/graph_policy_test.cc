// Tests for the CUDA engine's graph policy (plain C++): the eager -> capture -> replay -> evict
// state machine, failed captures, the LRU bound, and the bucket padding.
#include "engine/graph_policy.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

namespace petal {
namespace {

using A = GraphPolicy::Action;

TEST(GraphPolicy, EagerThenCaptureThenReplay) {
  GraphPolicy p(8, true);
  const GraphKey k{4, 128, 64};
  EXPECT_EQ(p.Next(k), A::kEager);
  EXPECT_EQ(p.Next(k), A::kCapture);
  EXPECT_TRUE(p.Captured(k, true).empty());
  EXPECT_TRUE(p.HasGraph(k));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(p.Next(k), A::kReplay);
  EXPECT_EQ(p.eager_runs(), 1);
  EXPECT_EQ(p.captures(), 1);
  EXPECT_EQ(p.replays(), 6);  // the captured batch itself runs by replay
  EXPECT_EQ(p.cached(), 1);
}

// Pooling-span counts are bucketed like sequence counts (0 stays 0: no spans), and a span batch
// has its own graph key.
TEST(BucketPolicy, SpanCountsPadToPowersOfTwo) {
  BucketPolicy b{64, 256, 1024, 32768, 512, 2048};
  EXPECT_EQ(b.PadSpans(0), 0);
  EXPECT_EQ(b.PadSpans(1), 1);
  EXPECT_EQ(b.PadSpans(5), 8);
  EXPECT_EQ(b.PadSpans(1025), 2048);
  EXPECT_EQ(b.PadSpans(4000), 2048);
  EXPECT_EQ(b.PadTokens(32768), 32768);  // a full 32K context is one bucket of its own
  const GraphKey plain{1, 32768, 32768}, spans{1, 32768, 32768, 16};
  EXPECT_TRUE(plain < spans);
  EXPECT_FALSE(plain == spans);
  GraphPolicy p(8, true);
  EXPECT_EQ(p.Next(plain), A::kEager);
  EXPECT_EQ(p.Next(spans), A::kEager);  // a different key: its own warm-up
}

TEST(GraphPolicy, FailedCaptureStaysEagerForGood) {
  // Regression: the old counter (uses = -(1 << 30), then ++uses == 1 never again) made every later
  // batch of a failed shape try to capture again.
  GraphPolicy p(8, true);
  const GraphKey k{1, 64, 64};
  EXPECT_EQ(p.Next(k), A::kEager);
  EXPECT_EQ(p.Next(k), A::kCapture);
  EXPECT_TRUE(p.Captured(k, false).empty());
  for (int i = 0; i < 100; ++i) ASSERT_EQ(p.Next(k), A::kEager) << i;
  EXPECT_EQ(p.capture_failures(), 1);
  EXPECT_EQ(p.captures(), 0);
  EXPECT_EQ(p.eager_runs(), 102);
  EXPECT_FALSE(p.HasGraph(k));
  // Other shapes are unaffected.
  const GraphKey other{2, 64, 64};
  EXPECT_EQ(p.Next(other), A::kEager);
  EXPECT_EQ(p.Next(other), A::kCapture);
}

TEST(GraphPolicy, DisabledRunsEverythingEagerly) {
  GraphPolicy p(8, false);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p.Next({1, 64, 64}), A::kEager);
  EXPECT_EQ(p.eager_runs(), 10);
  EXPECT_EQ(p.cached(), 0);
}

TEST(GraphPolicy, LeastRecentlyUsedIsEvictedAndCapturedAgainOnReturn) {
  GraphPolicy p(2, true);
  const GraphKey a{1, 64, 64}, b{2, 64, 64}, c{4, 64, 64};
  auto warm_and_capture = [&](const GraphKey& k) {
    EXPECT_EQ(p.Next(k), A::kEager);
    EXPECT_EQ(p.Next(k), A::kCapture);
    return p.Captured(k, true);
  };
  EXPECT_TRUE(warm_and_capture(a).empty());
  EXPECT_TRUE(warm_and_capture(b).empty());
  EXPECT_EQ(p.Next(a), A::kReplay);  // a is now more recent than b
  const auto evicted = warm_and_capture(c);
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0], b);
  EXPECT_FALSE(p.HasGraph(b));
  EXPECT_EQ(p.Next(b), A::kCapture);  // already warm: no second eager run
  EXPECT_EQ(p.evictions(), 1);
  EXPECT_EQ(p.cached(), 2);
}

TEST(GraphPolicy, RandomTrafficKeepsGraphsConsistentWithDecisions) {
  // Drive the policy like GraphCache does, with a fake "exec" table and random capture failures.
  std::mt19937 rng(5);
  GraphPolicy p(5, true);
  std::set<GraphKey> execs, failed;
  std::map<GraphKey, int> seen;
  for (int i = 0; i < 5000; ++i) {
    const GraphKey k{1 << std::uniform_int_distribution<int>(0, 3)(rng),
                     64 * std::uniform_int_distribution<int>(1, 4)(rng), 64};
    const int uses = seen[k]++;
    switch (p.Next(k)) {
      case A::kReplay:
        ASSERT_TRUE(execs.count(k));
        break;
      case A::kEager:
        ASSERT_FALSE(execs.count(k));
        ASSERT_TRUE(uses == 0 || failed.count(k)) << "eager only on first use or after failure";
        break;
      case A::kCapture: {
        ASSERT_FALSE(execs.count(k));
        ASSERT_FALSE(failed.count(k));
        const bool ok = std::uniform_int_distribution<int>(0, 9)(rng) != 0;
        for (const GraphKey& v : p.Captured(k, ok)) ASSERT_EQ(execs.erase(v), 1u);
        if (ok) execs.insert(k);
        if (!ok) failed.insert(k);
        break;
      }
    }
    ASSERT_LE(execs.size(), 5u);
    ASSERT_EQ(static_cast<int>(execs.size()), p.cached());
  }
  EXPECT_EQ(p.capture_failures(), static_cast<int64_t>(failed.size()));
}

TEST(BucketPolicy, PaddingBoundsAgainstBruteForce) {
  const BucketPolicy b{64, 256, 1024, 4096, 64};
  for (int t = 1; t <= 4096; ++t) {
    const int p = b.PadTokens(t);
    ASSERT_GE(p, t);
    ASSERT_LE(p, 4096);
    const int step = t <= 1024 ? 64 : 256;
    // The smallest multiple of the step at or above t, clamped to the capacity.
    int want = step;
    while (want < t) want += step;
    ASSERT_EQ(p, std::min(want, 4096)) << t;
  }
  for (int s = 1; s <= 64; ++s) {
    const int p = b.PadSeqs(s);
    ASSERT_GE(p, s);
    ASSERT_EQ(p & (p - 1), 0) << s;  // a power of two
    ASSERT_LT(p / 2, s);             // the smallest one
  }
  const BucketPolicy small{64, 256, 1024, 4096, 48};
  EXPECT_EQ(small.PadSeqs(40), 48);  // clamped to capacity
  EXPECT_EQ(b.PadMaxLen(1, 512), 64);
  EXPECT_EQ(b.PadMaxLen(65, 512), 128);
  EXPECT_EQ(b.PadMaxLen(300, 320), 320);  // never above the padded token count
}

}  // namespace
}  // namespace petal
