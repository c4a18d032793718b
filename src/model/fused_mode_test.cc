// Tests of the fused-GEMM ladder's mode strings (fused_mode.h).
#include "model/fused_mode.h"

#include <gtest/gtest.h>

namespace petal {
namespace {

TEST(FusedModeTest, UnsetTakesTheFallback) {
  EXPECT_EQ(ParseFusedMode(nullptr, -4096), -4096);
  EXPECT_EQ(ParseFusedMode(nullptr, 0), 0);
}

TEST(FusedModeTest, NumbersForceFromThatSize) {
  EXPECT_EQ(ParseFusedMode("0", -4096), 0);
  EXPECT_EQ(ParseFusedMode("1", 0), 1);
  EXPECT_EQ(ParseFusedMode("4096", 0), 4096);
  EXPECT_EQ(ParseFusedMode("99999999999", 0), 1 << 30);
}

TEST(FusedModeTest, AutoIsTimed) {
  EXPECT_EQ(ParseFusedMode("auto", 0), kFusedAuto);
  EXPECT_EQ(ParseFusedMode("auto:4096", 0), -4096);
  EXPECT_EQ(ParseFusedMode("auto:1", 0), kFusedAuto);
  EXPECT_EQ(ParseFusedMode("auto:0", 0), kFusedAuto);
}

TEST(FusedModeTest, AnythingElseIsOff) {
  for (const char* bad : {"", "on", "-5", "+5", "12x", "auto:", "auto:-3", "auto:5k", "AUTO", " 5"})
    EXPECT_EQ(ParseFusedMode(bad, -4096), 0) << '"' << bad << '"';
}

}  // namespace
}  // namespace petal
