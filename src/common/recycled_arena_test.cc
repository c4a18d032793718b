#include "common/recycled_arena.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace petal {
namespace {

using String = std::basic_string<char, std::char_traits<char>, ArenaAllocator<char>>;

TEST(RecycledArenaTest, ABlockComesBackToItsThreadOnceTheLastCopyIsGone) {
  { String warm(ArenaAllocator<char>::Recycled()); }
  const size_t blocks = RecycledArena::CachedOnThisThread();
  for (int i = 0; i < 100; ++i) {
    String s(ArenaAllocator<char>::Recycled());
    s.assign(100, 'a');  // past the short-string buffer: from the arena
    String copy_of_allocator(s.get_allocator());
  }
  EXPECT_EQ(RecycledArena::CachedOnThisThread(), blocks);  // no block was made
}

TEST(RecycledArenaTest, ABlockInUseIsNotHandedOutAgain) {
  String a(ArenaAllocator<char>::Recycled());
  String b(ArenaAllocator<char>::Recycled());
  a.assign(100, 'a');
  b.assign(100, 'b');
  EXPECT_NE(a.data(), b.data());
  EXPECT_EQ(std::string_view(a), std::string(100, 'a'));
}

TEST(RecycledArenaTest, ReleasedOnAnotherThreadItIsReusedHere) {
  auto s = std::make_unique<String>(ArenaAllocator<char>::Recycled());
  s->assign(200, 'x');
  const char* p = s->data();
  const size_t blocks = RecycledArena::CachedOnThisThread();
  std::thread([s = std::move(s)]() mutable { s.reset(); }).join();
  // Every block of the cache is free again, that one included: taking them all makes none.
  std::vector<String> all;
  all.reserve(blocks);
  bool reused = false;
  for (size_t i = 0; i < blocks; ++i) {
    all.emplace_back(ArenaAllocator<char>::Recycled());
    all.back().assign(200, 'y');
    reused |= all.back().data() == p;
  }
  EXPECT_TRUE(reused);
  EXPECT_EQ(RecycledArena::CachedOnThisThread(), blocks);
}

TEST(RecycledArenaTest, OutlivesItsThread) {
  std::unique_ptr<String> s;
  std::thread([&s] {
    s = std::make_unique<String>(ArenaAllocator<char>::Recycled());
    s->assign(300, 'z');
  }).join();  // the thread's cache is gone; the block is not
  EXPECT_EQ(std::string_view(*s), std::string(300, 'z'));
  s->append(10, 'w');
  EXPECT_EQ(s->size(), 310u);
}

TEST(RecycledArenaTest, WhatDoesNotFitComesFromTheHeap) {
  String s(ArenaAllocator<char>::Recycled());
  s.assign(RecycledArena::kBlockBytes * 2, 'h');
  String small(s.get_allocator());
  small.assign(100, 's');  // the block is still empty: this one is in it
  EXPECT_EQ(s.size(), RecycledArena::kBlockBytes * 2);
  EXPECT_EQ(std::string_view(small), std::string(100, 's'));
}

TEST(RecycledArenaTest, AStringThatOutgrowsTheBlockMovesToTheHeap) {
  String s(ArenaAllocator<char>::Recycled());
  for (int i = 0; i < 10000; ++i) s.push_back('g');  // freed steps stay in the block: spills
  EXPECT_EQ(std::string_view(s), std::string(10000, 'g'));
}

TEST(RecycledArenaTest, ACopyDoesNotShareTheArena) {
  String s(ArenaAllocator<char>::Recycled());
  s.assign(100, 'c');
  String copy = s;
  EXPECT_FALSE(copy.get_allocator() == s.get_allocator());
  EXPECT_TRUE(copy.get_allocator() == ArenaAllocator<char>());  // heap only
  String moved = std::move(s);
  EXPECT_EQ(moved, copy);
}

TEST(RecycledArenaTest, VectorsOfOtherTypesRebind) {
  std::vector<double, ArenaAllocator<double>> v(
      ArenaAllocator<double>(ArenaAllocator<char>::Recycled()));
  for (int i = 0; i < 50; ++i) v.push_back(i * 0.5);
  EXPECT_EQ(v[49], 24.5);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % alignof(double), 0u);
}

}  // namespace
}  // namespace petal
