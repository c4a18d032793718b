// Recycler<T>: a bounded free list of objects whose heap buffers are worth keeping between uses
// (protobuf messages, vectors, strings, shared records). The serving path takes one per request
// and gives it back when the request is done, so a steady stream of requests reuses the same
// buffers instead of allocating and freeing them (issue 29: an allocation-free hot path).
//
// Contracts:
// - Take() returns an object that has been through `reset` (or a new one): empty, with whatever
//   capacity it had. It moves the object out of the list, so T's move must keep buffers (true of
//   std::vector, std::string, std::shared_ptr and heap-allocated protobuf messages, whose move is
//   a swap).
// - Give() resets the object and keeps it, unless the list is full, or `bytes` says it holds more
//   than max_bytes, or keeping it would take the kept objects past max_total_bytes (a burst of
//   huge requests must not pin its buffers for good); then it is left to the caller to destroy.
// - At most max_kept objects are kept; the list's storage is reserved once, so Give never
//   allocates.
//
// Thread-safety: Take and Give may be called from any thread at once (one mutex, held only to
// move one object in or out; reset and destruction run outside it).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/asan_interface.h>
#endif
#endif

namespace petal {

// Under ThreadSanitizer nothing is kept (Give returns false, so Take always makes a new object):
// memory reused without a free and a malloc keeps its earlier accesses in TSan's shadow state,
// and an object handed on through a library that TSan does not see into (gRPC's completion
// threads) would then be reported as racing with its next user.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kRecyclerKeeps = false;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kRecyclerKeeps = false;
#else
inline constexpr bool kRecyclerKeeps = true;
#endif
#else
inline constexpr bool kRecyclerKeeps = true;
#endif

// Under AddressSanitizer a block kept by RecyclingAllocator is poisoned while it waits in the free
// list, so a use after the record was destroyed (a "use after recycle") is reported like a use
// after free, yet the recycling code itself still runs under ASan.
#if defined(__SANITIZE_ADDRESS__)
#define PETAL_RECYCLER_POISONS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PETAL_RECYCLER_POISONS 1
#endif
#endif
#if defined(PETAL_RECYCLER_POISONS)
inline void RecyclerPoison(const void* p, size_t n) { __asan_poison_memory_region(p, n); }
inline void RecyclerUnpoison(const void* p, size_t n) { __asan_unpoison_memory_region(p, n); }
#else
inline void RecyclerPoison(const void*, size_t) {}
inline void RecyclerUnpoison(const void*, size_t) {}
#endif

template <typename T>
class Recycler {
 public:
  struct Policy {
    size_t max_kept = 64;
    size_t max_bytes = size_t{1} << 20;         // per object
    size_t max_total_bytes = size_t{64} << 20;  // all kept objects together
    void (*reset)(T&) = nullptr;                // empties an object, keeping its buffers
    size_t (*bytes)(const T&) = nullptr;        // the heap bytes it holds (null: not checked)
    bool (*reusable)(const T&) = nullptr;       // whether it may be kept at all (null: yes)
  };

  explicit Recycler(Policy policy) : policy_(policy) { free_.reserve(policy_.max_kept); }
  Recycler(const Recycler&) = delete;
  Recycler& operator=(const Recycler&) = delete;

  T Take() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        T v = std::move(free_.back());
        free_.pop_back();
        if (policy_.bytes) total_ -= policy_.bytes(v);
        return v;
      }
    }
    return T{};
  }

  // True if `v` was kept (moved from); false if it was not (left to the caller to destroy).
  bool Give(T&& v) {
    if constexpr (!kRecyclerKeeps) return false;
    if (policy_.reusable && !policy_.reusable(v)) return false;
    if (policy_.reset) policy_.reset(v);
    // Counted after the reset, as Take counts it back out.
    const size_t bytes = policy_.bytes ? policy_.bytes(v) : 0;
    if (bytes > policy_.max_bytes) return false;
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() >= policy_.max_kept || total_ + bytes > policy_.max_total_bytes) return false;
    free_.push_back(std::move(v));
    total_ += bytes;
    return true;
  }

  // Objects kept now (for tests).
  size_t kept() const {
    std::lock_guard<std::mutex> lock(mu_);
    return free_.size();
  }

 private:
  const Policy policy_;
  mutable std::mutex mu_;
  std::vector<T> free_;
  size_t total_ = 0;  // policy_.bytes of the kept objects (their reset keeps capacity)
};

// RecyclingAllocator<T>: an allocator for std::allocate_shared whose one-object blocks (the
// shared record and its control block together) come from a free list per block type, so a
// steady stream of shared records does not call malloc. At most 1,024 blocks of a type are
// kept; the list is never destroyed (blocks may be freed by threads still running at exit).
// Thread-safety: any thread; allocators of one type are interchangeable.
template <typename T>
struct RecyclingAllocator {
  using value_type = T;
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "over-aligned type");

  RecyclingAllocator() = default;
  template <typename U>
  RecyclingAllocator(const RecyclingAllocator<U>&) noexcept {}  // NOLINT: rebinding

  T* allocate(size_t n) {
    if (n == 1) {
      if (void* p = Blocks().Take()) {
        RecyclerUnpoison(p, sizeof(T));
        return static_cast<T*>(p);
      }
    }
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  // Poisoned before it is offered: once in the list another thread may take (and unpoison) it.
  void deallocate(T* p, size_t n) noexcept {
    if (n == 1) {
      RecyclerPoison(p, sizeof(T));
      if (Blocks().Give(static_cast<void*>(p))) return;
      RecyclerUnpoison(p, sizeof(T));
    }
    ::operator delete(p);
  }
  template <typename U>
  bool operator==(const RecyclingAllocator<U>&) const noexcept {
    return true;
  }

 private:
  static Recycler<void*>& Blocks() {
    static auto* blocks = new Recycler<void*>({.max_kept = 1024});
    return *blocks;
  }
};

// RecycledPtr<T>: a unique_ptr to one object in a RecyclingAllocator<T> block (MakeRecycled), for
// a per-request record that has one owner: the block goes back to the free list when it is
// destroyed, on any thread.
template <typename T>
struct RecycledDelete {
  void operator()(T* p) const noexcept {
    p->~T();
    RecyclingAllocator<T>().deallocate(p, 1);
  }
};
template <typename T>
using RecycledPtr = std::unique_ptr<T, RecycledDelete<T>>;

template <typename T, typename... A>
RecycledPtr<T> MakeRecycled(A&&... args) {
  RecyclingAllocator<T> alloc;
  T* p = alloc.allocate(1);
  try {
    ::new (static_cast<void*>(p)) T(std::forward<A>(args)...);
  } catch (...) {
    alloc.deallocate(p, 1);
    throw;
  }
  return RecycledPtr<T>(p);
}

}  // namespace petal
