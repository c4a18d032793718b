// Tests for Recycler: reuse keeps buffers, the bounds hold, and concurrent use is safe.
#include "common/recycler.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace petal {
namespace {

Recycler<std::vector<int>>::Policy VectorPolicy(size_t max_kept, size_t max_bytes) {
  return {.max_kept = max_kept,
          .max_bytes = max_bytes,
          .reset = [](std::vector<int>& v) { v.clear(); },
          .bytes = [](const std::vector<int>& v) { return v.capacity() * sizeof(int); },
          .reusable = [](const std::vector<int>& v) { return v.capacity() > 0; }};
}

TEST(Recycler, ReusesBuffersAndResets) {
  Recycler<std::vector<int>> r(VectorPolicy(4, 1 << 20));
  std::vector<int> v(1000, 7);
  const int* data = v.data();
  r.Give(std::move(v));
  EXPECT_EQ(r.kept(), 1u);
  std::vector<int> again = r.Take();
  EXPECT_TRUE(again.empty());          // reset
  EXPECT_GE(again.capacity(), 1000u);  // buffer kept
  EXPECT_EQ(again.data(), data);       // the very same buffer
  EXPECT_EQ(r.kept(), 0u);
  EXPECT_TRUE(r.Take().empty());  // none kept: a new object
}

TEST(Recycler, BoundsCountAndSizeAndSkipsUnusable) {
  Recycler<std::vector<int>> r(VectorPolicy(2, 4096));
  for (int i = 0; i < 5; ++i) r.Give(std::vector<int>(10, i));
  EXPECT_EQ(r.kept(), 2u);  // max_kept
  Recycler<std::vector<int>> small(VectorPolicy(8, 4096));
  small.Give(std::vector<int>(2000));  // 8,000 bytes > max_bytes: freed
  small.Give(std::vector<int>());      // no buffer: not worth a slot
  EXPECT_EQ(small.kept(), 0u);
}

TEST(Recycler, BoundsTheBytesKeptInAll) {
  auto policy = VectorPolicy(16, 4096);
  policy.max_total_bytes = 3 * 4000;
  Recycler<std::vector<int>> r(policy);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(r.Give(std::vector<int>(1000)), i < 3) << i;
  EXPECT_EQ(r.kept(), 3u);
  std::vector<int> v = r.Take();  // room for one more again
  EXPECT_TRUE(r.Give(std::vector<int>(1000)));
  EXPECT_FALSE(r.Give(std::vector<int>(1000)));
}

TEST(Recycler, ConcurrentTakeAndGive) {
  Recycler<std::vector<int>> r(VectorPolicy(16, 1 << 20));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&r, t] {
      for (int i = 0; i < 2000; ++i) {
        std::vector<int> v = r.Take();
        ASSERT_TRUE(v.empty());
        v.assign(16 + (i % 7), t);
        for (int x : v) ASSERT_EQ(x, t);
        r.Give(std::move(v));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(r.kept(), 16u);
  EXPECT_GE(r.kept(), 1u);
}

TEST(Recycler, MakeRecycledReusesTheBlockOfADestroyedRecord) {
  struct Record {
    std::string name;
    int* destroyed;
    ~Record() { ++*destroyed; }
  };
  int destroyed = 0;
  const Record* first = nullptr;
  {
    RecycledPtr<Record> a = MakeRecycled<Record>(Record{"a", &destroyed});
    first = a.get();
    EXPECT_EQ(a->name, "a");
  }
  EXPECT_GE(destroyed, 1);
  const int before = destroyed;
  RecycledPtr<Record> b = MakeRecycled<Record>(Record{"b", &destroyed});
  EXPECT_EQ(b.get(), first);  // this type's list had the block back
  b.reset();
  EXPECT_EQ(destroyed, before + 2);  // the temporary and the record, once each
}

// Under ASan a kept block is poisoned until it is handed out again, so a use after recycle is
// reported; without ASan there is nothing to check.
TEST(Recycler, KeptBlocksArePoisonedUnderAddressSanitizer) {
#if defined(PETAL_RECYCLER_POISONS)
  struct Record {
    int64_t values[6] = {1, 2, 3, 4, 5, 6};
  };
  const Record* first = nullptr;
  {
    RecycledPtr<Record> a = MakeRecycled<Record>();
    first = a.get();
    EXPECT_FALSE(__asan_address_is_poisoned(&first->values[5]));
  }
  EXPECT_TRUE(__asan_address_is_poisoned(&first->values[0]));
  EXPECT_TRUE(__asan_address_is_poisoned(&first->values[5]));
  RecycledPtr<Record> b = MakeRecycled<Record>();
  ASSERT_EQ(b.get(), first);
  EXPECT_FALSE(__asan_address_is_poisoned(&b->values[0]));
  EXPECT_FALSE(__asan_address_is_poisoned(&b->values[5]));
  EXPECT_EQ(b->values[5], 6);
#else
  GTEST_SKIP() << "not an AddressSanitizer build";
#endif
}

}  // namespace
}  // namespace petal
