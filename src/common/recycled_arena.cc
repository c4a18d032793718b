// The per-thread cache of RecycledArena blocks (see recycled_arena.h).
#include "common/recycled_arena.h"

#include <vector>

namespace petal {

// The blocks one thread hands out. The cache holds one reference on each of its blocks, so a
// block whose count is 1 is free: only the owning thread can take a reference then (nobody else
// has one to copy), which is why Acquire may reset it without a lock. At thread exit the cache
// drops its references and each block is deleted by whoever releases it last.
class ArenaCache {
 public:
  // Enough for the messages one thread has in flight at once (a thread that builds responses
  // for many connections); beyond this the allocators fall back to the heap.
  static constexpr size_t kMaxBlocks = 64;

  ArenaCache() { blocks_.reserve(kMaxBlocks); }
  ~ArenaCache() {
    for (RecycledArena* b : blocks_) b->Release();
  }

  RecycledArena* Acquire() {
    const size_t n = blocks_.size();
    for (size_t i = 0; i < n; ++i) {
      // Start after the last block handed out: the ones before it are likely still in use.
      RecycledArena* b = blocks_[(next_ + i) % n];
      if (b->refs_.load(std::memory_order_acquire) == 1) {
        next_ = (next_ + i + 1) % n;
        return Reset(b);
      }
    }
    if (n == kMaxBlocks) return nullptr;
    blocks_.push_back(new RecycledArena());
    return Reset(blocks_.back());
  }

  size_t size() const { return blocks_.size(); }

 private:
  static RecycledArena* Reset(RecycledArena* b) {
    b->used_ = 0;
    b->refs_.store(2, std::memory_order_relaxed);  // the cache's and the caller's
    return b;
  }

  std::vector<RecycledArena*> blocks_;
  size_t next_ = 0;
};

namespace {
ArenaCache& ThisThreadCache() {
  thread_local ArenaCache cache;
  return cache;
}
}  // namespace

RecycledArena* RecycledArena::Acquire() { return ThisThreadCache().Acquire(); }

void RecycledArena::Release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

size_t RecycledArena::CachedOnThisThread() { return ThisThreadCache().size(); }

}  // namespace petal
