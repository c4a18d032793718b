#include "common/unique_function.h"

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>
#include <utility>

namespace petal {
namespace {

// Counts constructions and destructions of its instances (moved-from ones included).
struct Tracked {
  static inline int live = 0;
  static inline int destroyed = 0;
  Tracked() { ++live; }
  Tracked(const Tracked&) { ++live; }
  Tracked(Tracked&&) noexcept { ++live; }
  ~Tracked() {
    --live;
    ++destroyed;
  }
};

// A callable too large to be kept inline, with a non-trivial destructor.
struct Big {
  std::array<char, 128> pad{};
  Tracked t;
  std::unique_ptr<int> value;
  int operator()(int x) { return *value + x; }
};
static_assert(!UniqueFunction<int(int)>::kStoredInline<Big>);
static_assert(sizeof(UniqueFunction<void()>) == UniqueFunction<void()>::kInlineBytes + 8);

TEST(UniqueFunctionTest, InlineCallableWithMoveOnlyCapture) {
  auto p = std::make_unique<int>(40);
  auto f = [p = std::move(p)](int x) { return *p + x; };
  static_assert(UniqueFunction<int(int)>::kStoredInline<decltype(f)>);
  UniqueFunction<int(int)> g = std::move(f);
  ASSERT_TRUE(g);
  EXPECT_EQ(g(2), 42);
  EXPECT_EQ(g(3), 43);  // may be called again
}

TEST(UniqueFunctionTest, LargeCallableUsesARecycledBlock) {
  Big big;
  big.value = std::make_unique<int>(7);
  UniqueFunction<int(int)> g = std::move(big);
  EXPECT_EQ(g(1), 8);
  UniqueFunction<int(int)> h = std::move(g);
  EXPECT_FALSE(g);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(h(2), 9);
}

TEST(UniqueFunctionTest, DestroysTheCallableExactlyOnce) {
  for (bool large : {false, true}) {
    Tracked::live = 0;
    Tracked::destroyed = 0;
    {
      UniqueFunction<int(int)> a;
      if (large) {
        Big big;
        big.value = std::make_unique<int>(1);
        a = std::move(big);
      } else {
        a = [t = Tracked()](int x) { return x; };
      }
      EXPECT_EQ(Tracked::live, 1) << large;
      UniqueFunction<int(int)> b = std::move(a);
      UniqueFunction<int(int)> c;
      c = std::move(b);
      c = std::move(c);  // self-move keeps it
      EXPECT_EQ(Tracked::live, 1) << large;
      EXPECT_EQ(c(5), large ? 6 : 5);
    }
    EXPECT_EQ(Tracked::live, 0) << large;
  }
}

TEST(UniqueFunctionTest, AssigningNullOrAnotherDestroysTheOldCallable) {
  Tracked::live = 0;
  UniqueFunction<void()> f = [t = Tracked()] {};
  EXPECT_EQ(Tracked::live, 1);
  f = nullptr;
  EXPECT_EQ(Tracked::live, 0);
  EXPECT_FALSE(f);
  f = [t = Tracked()] {};
  f = [] {};
  EXPECT_EQ(Tracked::live, 0);
  EXPECT_TRUE(f);
}

TEST(UniqueFunctionTest, EmptyCallThrows) {
  UniqueFunction<void()> empty;
  EXPECT_FALSE(empty);
  EXPECT_TRUE(empty == nullptr);
  EXPECT_THROW(empty(), std::bad_function_call);
  int (*null_fn)(int) = nullptr;
  UniqueFunction<int(int)> from_null = null_fn;
  EXPECT_FALSE(from_null);
  UniqueFunction<int(int)> from_empty = std::function<int(int)>();
  EXPECT_FALSE(from_empty);
}

int Twice(int x) { return 2 * x; }

TEST(UniqueFunctionTest, FunctionPointersStdFunctionsAndMutableLambdas) {
  UniqueFunction<int(int)> f = &Twice;
  EXPECT_EQ(f(4), 8);
  UniqueFunction<int(int)> g = std::function<int(int)>([](int x) { return x + 1; });
  EXPECT_EQ(g(4), 5);
  const UniqueFunction<int()> counter = [n = 0]() mutable { return ++n; };
  EXPECT_EQ(counter(), 1);
  EXPECT_EQ(counter(), 2);  // the capture changed in place
}

TEST(UniqueFunctionTest, ForwardsMoveOnlyAndReferenceArguments) {
  std::string out;
  UniqueFunction<void(std::unique_ptr<std::string>, std::string&)> f =
      [](std::unique_ptr<std::string> s, std::string& o) { o = std::move(*s); };
  f(std::make_unique<std::string>("moved"), out);
  EXPECT_EQ(out, "moved");
  // A callable returning something convertible to R.
  UniqueFunction<std::string()> s = [] { return "text"; };
  EXPECT_EQ(s(), "text");
}

TEST(UniqueFunctionTest, NestedCallbacksEachRunOnce) {
  int inner_calls = 0;
  UniqueFunction<void(int)> inner = [&inner_calls](int) { ++inner_calls; };
  // Captures another UniqueFunction: larger than the inline buffer, so in a recycled block.
  UniqueFunction<void(int)> outer = [inner = std::move(inner), t = Tracked()](int x) {
    inner(x + 1);
  };
  UniqueFunction<void(int)> moved = std::move(outer);
  moved(1);
  EXPECT_EQ(inner_calls, 1);
}

}  // namespace
}  // namespace petal
