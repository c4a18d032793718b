#include "common/ring_queue.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <random>

namespace petal {
namespace {

TEST(RingQueue, KeepsFifoOrderAcrossWrapAndGrowth) {
  RingQueue<int> q;
  std::deque<int> want;
  std::mt19937 rng(5);
  for (int i = 0; i < 20000; ++i) {
    const int op = static_cast<int>(rng() % 4);
    if (op < 2) {
      q.push_back(i);
      want.push_back(i);
    } else if (op == 2) {
      q.push_front(-i);
      want.push_front(-i);
    } else if (!want.empty()) {
      ASSERT_EQ(q.front(), want.front());
      q.pop_front();
      want.pop_front();
    }
    ASSERT_EQ(q.size(), want.size());
  }
  while (!want.empty()) {
    ASSERT_EQ(q.front(), want.front());
    q.pop_front();
    want.pop_front();
  }
  EXPECT_TRUE(q.empty());
}

TEST(RingQueue, ReusesItsBufferAndReleasesPoppedElements) {
  RingQueue<std::shared_ptr<int>> q;
  auto p = std::make_shared<int>(1);
  for (int i = 0; i < 1000; ++i) {
    q.push_back(p);
    q.push_back(p);
    q.pop_front();
    q.pop_front();
  }
  EXPECT_EQ(q.capacity(), 16u);  // never grew past its first buffer
  EXPECT_EQ(p.use_count(), 1);   // popped slots hold nothing
  for (int i = 0; i < 5000; ++i) q.push_back(p);
  EXPECT_GE(q.capacity(), 5000u);
  while (!q.empty()) q.pop_front();
  EXPECT_EQ(q.capacity(), 0u);  // a burst's buffer is freed once it drains
  EXPECT_EQ(p.use_count(), 1);
}

}  // namespace
}  // namespace petal
