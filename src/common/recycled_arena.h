// ArenaAllocator<T>: an allocator for the small, short-lived containers of one message (an HTTP
// request's or response's header fields, a request's body), so that serving a request does not
// call malloc for them. Each message takes a RecycledArena: a fixed block with a bump pointer and
// a reference count (every allocator copy holds one). The block goes back to the thread that took
// it once the last copy is gone, wherever that happens, and that thread hands it out again; a
// request that outlives its connection or a response built on one thread and destroyed on another
// is therefore safe. What does not fit in the block comes from operator new, as with
// std::allocator.
//
// Deallocation inside the block does nothing: the space returns with the block. A message that
// keeps growing a string or replacing fields spills to the heap; it never fails.
//
// Thread-safety: an arena is used by one message, and a message by one thread at a time (as any
// Beast message); handing the message to another thread (a move, a capture) carries its arena.
// Only the reference count is atomic. A default-constructed allocator and a copy made by a
// container's copy constructor use the heap only, so a copied message never shares an arena.
#pragma once

#include <atomic>
#include <cstddef>
#include <new>
#include <type_traits>

namespace petal {

class RecycledArena {
 public:
  // Bytes of one block (header included): an HTTP request of a few headers and a ~1 KB body.
  static constexpr size_t kBlockBytes = 4096;

  // An arena from this thread's cache, holding one reference for the caller (released by
  // Release), or null when the cache is full and every block in it is in use.
  static RecycledArena* Acquire();

  void AddRef() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Release();

  void* Allocate(size_t bytes, size_t align) {
    const size_t at = (used_ + align - 1) & ~(align - 1);
    if (at > kCapacity || bytes > kCapacity - at) return nullptr;
    used_ = at + bytes;
    return data_ + at;
  }
  // True if `p` is in the block (then there is nothing to free).
  bool Contains(const void* p) const {
    auto* c = static_cast<const unsigned char*>(p);
    return c >= data_ && c < data_ + kCapacity;
  }

  // How many blocks this thread's cache holds (for tests).
  static size_t CachedOnThisThread();

 private:
  friend class ArenaCache;
  RecycledArena() = default;

  static constexpr size_t kHeader = 16;
  static constexpr size_t kCapacity = kBlockBytes - kHeader;
  std::atomic<int> refs_{1};
  size_t used_ = 0;
  alignas(16) unsigned char data_[kCapacity];
};
static_assert(sizeof(RecycledArena) == RecycledArena::kBlockBytes);

template <typename T>
class ArenaAllocator {
 public:
  using value_type = T;
  // Moving or swapping a container moves its arena with it; copying one gives the copy its own
  // storage (see select_on_container_copy_construction), so copy assignment keeps the target's.
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_copy_assignment = std::false_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::false_type;

  ArenaAllocator() noexcept = default;  // heap only
  // An allocator on a block recycled by this thread (heap only if none is free).
  static ArenaAllocator Recycled() { return ArenaAllocator(RecycledArena::Acquire()); }

  template <typename U>
  ArenaAllocator(const ArenaAllocator<U>& o) noexcept : arena_(o.arena_) {  // NOLINT: rebinds
    if (arena_) arena_->AddRef();
  }
  ArenaAllocator(const ArenaAllocator& o) noexcept : arena_(o.arena_) {
    if (arena_) arena_->AddRef();
  }
  ArenaAllocator& operator=(const ArenaAllocator& o) noexcept {
    if (o.arena_) o.arena_->AddRef();
    if (arena_) arena_->Release();
    arena_ = o.arena_;
    return *this;
  }
  ~ArenaAllocator() {
    if (arena_) arena_->Release();
  }

  ArenaAllocator select_on_container_copy_construction() const { return ArenaAllocator(); }

  T* allocate(size_t n) {
    if (arena_) {
      if (void* p = arena_->Allocate(n * sizeof(T), alignof(T))) return static_cast<T*>(p);
    }
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, size_t) noexcept {
    if (arena_ && arena_->Contains(p)) return;
    ::operator delete(p);
  }

  template <typename U>
  bool operator==(const ArenaAllocator<U>& o) const noexcept {
    return arena_ == o.arena_;
  }

 private:
  template <typename U>
  friend class ArenaAllocator;
  // Takes over the reference that Acquire returned.
  explicit ArenaAllocator(RecycledArena* arena) noexcept : arena_(arena) {}
  static_assert(alignof(T) <= 16, "the arena aligns to 16 bytes at most");

  RecycledArena* arena_ = nullptr;
};

}  // namespace petal
