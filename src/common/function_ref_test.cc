#include "common/function_ref.h"

#include <gtest/gtest.h>

#include <string>

namespace petal {
namespace {

int Apply(FunctionRef<int(int, int)> f, int a, int b) { return f(a, b); }

TEST(FunctionRefTest, CallsLambdasWithStateByReference) {
  int calls = 0;
  auto add = [&calls](int a, int b) {
    ++calls;
    return a + b;
  };
  EXPECT_EQ(Apply(add, 2, 3), 5);
  EXPECT_EQ(Apply([](int a, int b) { return a * b; }, 4, 5), 20);
  EXPECT_EQ(calls, 1);  // the named lambda was referenced, not copied
}

int Sub(int a, int b) { return a - b; }

TEST(FunctionRefTest, CallsFunctionsAndMutableCallables) {
  EXPECT_EQ(Apply(&Sub, 7, 2), 5);  // the pointer outlives the call: it is a temporary of it
  struct Counter {
    int n = 0;
    int operator()(int a, int b) { return n += a + b; }
  } counter;
  Apply(counter, 1, 1);
  Apply(counter, 2, 2);
  EXPECT_EQ(counter.n, 6);  // both calls reached the same object
}

TEST(FunctionRefTest, ForwardsRvalueAndLvalueReferenceArguments) {
  std::string seen;
  auto take = [&](std::string&& s, std::string& out) {
    out = std::move(s);
    seen = out;
  };
  FunctionRef<void(std::string&&, std::string&)> f = take;  // `take` outlives f's calls
  std::string out;
  f(std::string(40, 'x'), out);
  EXPECT_EQ(out, std::string(40, 'x'));
  EXPECT_EQ(seen, out);
}

}  // namespace
}  // namespace petal
