// Tests for the serving processes' malloc policy: which threshold each environment asks for.
#include "common/malloc_policy.h"

#include <gtest/gtest.h>

namespace petal {
namespace {

TEST(MallocPolicy, FixedThresholdUnlessACpuEngineRunsHere) {
  EXPECT_EQ(ServingMmapThreshold(nullptr, nullptr, false), size_t{256} << 10);
  EXPECT_EQ(ServingMmapThreshold(nullptr, nullptr, true), 0u);
  EXPECT_EQ(ServingMmapThreshold("", "", false), size_t{256} << 10);
}

TEST(MallocPolicy, EnvironmentOverrides) {
  EXPECT_EQ(ServingMmapThreshold("1048576", nullptr, false), size_t{1} << 20);
  EXPECT_EQ(ServingMmapThreshold("1048576", nullptr, true), size_t{1} << 20);  // asked for
  EXPECT_EQ(ServingMmapThreshold("0", nullptr, false), 0u);
  EXPECT_EQ(ServingMmapThreshold("12x", nullptr, false), 0u);       // junk: leave glibc's
  EXPECT_EQ(ServingMmapThreshold("67108864", nullptr, false), 0u);  // above glibc's cap
  EXPECT_EQ(ServingMmapThreshold("1048576", "65536", false), 0u);   // glibc's own variable
  EXPECT_EQ(ServingMmapThreshold(nullptr, "65536", false), 0u);
}

}  // namespace
}  // namespace petal
