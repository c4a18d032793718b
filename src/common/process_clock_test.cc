// ProcessAgeSeconds: small at start, grows with the time this process runs.
#include "common/process_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace petal {
namespace {

TEST(ProcessClock, AgeGrowsWithTime) {
  const double a = ProcessAgeSeconds();
  EXPECT_GT(a, 0.0);
  EXPECT_LT(a, 120.0);  // this test binary started moments ago
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double b = ProcessAgeSeconds();
  EXPECT_GE(b - a, 0.25);  // 10 ms ticks: 0.3 s is well above the resolution
  EXPECT_LT(b - a, 5.0);
}

}  // namespace
}  // namespace petal
