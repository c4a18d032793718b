#include "common/status.h"

#include <gtest/gtest.h>

namespace petal {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2) return InvalidArgument("x is odd: " + std::to_string(x));
  return x / 2;
}

StatusOr<int> Quarter(int x) {
  PETAL_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(StatusTest, OkAndError) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = InvalidArgument("field 'input' is empty");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "INVALID_ARGUMENT: field 'input' is empty");
  EXPECT_EQ(s.WithContext("request 3").message(), "request 3: field 'input' is empty");
}

TEST(StatusTest, AssignOrReturnPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  auto r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "x is odd: 3");
}

}  // namespace
}  // namespace petal
