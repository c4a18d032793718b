#include "common/env.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace petal {
namespace {

TEST(EnvTest, NonNegativeIntegersOnly) {
  const char* kName = "PETAL_ENV_TEST_VALUE";
  unsetenv(kName);
  EXPECT_FALSE(EnvNonNegative(kName).has_value());
  setenv(kName, "", 1);
  EXPECT_FALSE(EnvNonNegative(kName).has_value());
  setenv(kName, "512", 1);
  EXPECT_EQ(EnvNonNegative(kName), 512);
  setenv(kName, "0", 1);
  EXPECT_EQ(EnvNonNegative(kName), 0);
  for (const char* bad : {"-1", "12x", "x", "1.5", " 7x"}) {
    setenv(kName, bad, 1);
    EXPECT_FALSE(EnvNonNegative(kName).has_value()) << bad;
  }
  unsetenv(kName);
}

}  // namespace
}  // namespace petal
