// UniqueFunction<R(Args...)>: a move-only, type-erased owning callable, for the serving path's
// callbacks (an HTTP reply, a chunk's or a call's completion), which are handed on and called
// once and so need neither copies nor std::function's allocation (issue 29: an allocation-free
// hot path). C++23's std::move_only_function, cut down, for GCC 12.
//
// Contracts:
// - A callable of at most kInlineBytes (7 pointers) whose move does not throw is kept inside the
//   object: constructing, moving and destroying it never allocates. A larger one (typically a
//   lambda that captures another UniqueFunction) is kept in a block from a free list of its own
//   type (RecyclingAllocator, common/recycler.h): in steady state that does not call malloc
//   either; moving the UniqueFunction then moves only the block's address.
// - The callable is destroyed exactly once: when the UniqueFunction holding it is destroyed,
//   assigned to, or set to nullptr. A moved-from UniqueFunction is empty.
// - operator() is const, as std::function's, and calls the callable as a non-const object (a
//   mutable lambda may change its captures). Calling an empty one throws std::bad_function_call.
// - Built from a null function pointer or an empty std::function, it is empty.
//
// Thread-safety: as std::function's: different objects may be used from different threads at
// once; one object must not be called, moved or destroyed on two threads at once.
#pragma once

#include <cstddef>
#include <functional>
#include <new>
#include <type_traits>
#include <utility>

#include "common/recycler.h"

namespace petal {

template <typename Signature>
class UniqueFunction;

namespace unique_function_internal {

template <typename T>
struct IsUniqueFunction : std::false_type {};
template <typename S>
struct IsUniqueFunction<UniqueFunction<S>> : std::true_type {};

// True if `f` is a null function pointer or member pointer, or an empty std::function.
template <typename F>
bool IsNull(const F& f) {
  if constexpr (std::is_pointer_v<F> || std::is_member_pointer_v<F>) {
    return f == nullptr;
  } else {
    return false;
  }
}
template <typename R, typename... A>
bool IsNull(const std::function<R(A...)>& f) {
  return !f;
}

}  // namespace unique_function_internal

template <typename R, typename... Args>
class UniqueFunction<R(Args...)> {
 public:
  // Bytes of callable kept inside the object; sizeof(UniqueFunction) is this plus one pointer.
  static constexpr size_t kInlineBytes = 7 * sizeof(void*);

  UniqueFunction() noexcept = default;
  UniqueFunction(std::nullptr_t) noexcept {}  // NOLINT(google-explicit-constructor)

  template <typename F, typename D = std::decay_t<F>>
  requires(!unique_function_internal::IsUniqueFunction<D>::value && std::is_constructible_v<D, F> &&
           std::is_invocable_r_v<R, D&, Args...>)
      UniqueFunction(F&& f) {  // NOLINT(google-explicit-constructor): binds like std::function
    if (unique_function_internal::IsNull(f)) return;
    if constexpr (kStoredInline<D>) {
      ::new (static_cast<void*>(buf_)) D(std::forward<F>(f));
    } else {
      RecyclingAllocator<D> alloc;
      D* p = alloc.allocate(1);
      try {
        ::new (static_cast<void*>(p)) D(std::forward<F>(f));
      } catch (...) {
        alloc.deallocate(p, 1);
        throw;
      }
      *reinterpret_cast<D**>(buf_) = p;
    }
    ops_ = &kOps<D>;
  }

  UniqueFunction(UniqueFunction&& o) noexcept { MoveFrom(o); }
  UniqueFunction& operator=(UniqueFunction&& o) noexcept {
    if (this != &o) {
      Reset();
      MoveFrom(o);
    }
    return *this;
  }
  UniqueFunction& operator=(std::nullptr_t) noexcept {
    Reset();
    return *this;
  }
  template <typename F>
  requires std::is_constructible_v<UniqueFunction, F> UniqueFunction& operator=(F&& f) {
    return *this = UniqueFunction(std::forward<F>(f));
  }
  UniqueFunction(const UniqueFunction&) = delete;
  UniqueFunction& operator=(const UniqueFunction&) = delete;
  ~UniqueFunction() { Reset(); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }
  friend bool operator==(const UniqueFunction& f, std::nullptr_t) noexcept { return !f; }

  R operator()(Args... args) const {
    if (ops_ == nullptr) throw std::bad_function_call();
    return ops_->call(const_cast<unsigned char*>(buf_), std::forward<Args>(args)...);
  }

  // Whether a callable of type F is kept inside the object (for tests and static checks).
  template <typename F>
  static constexpr bool kStoredInline =
      sizeof(F) <= kInlineBytes &&
      alignof(F) <= alignof(std::max_align_t) && std::is_nothrow_move_constructible_v<F>;

 private:
  struct Ops {
    R (*call)(void* buf, Args&&... args);
    // Moves the callable (or its block's address) from `from` to `to`, leaving `from` with
    // nothing to destroy.
    void (*move)(void* from, void* to) noexcept;
    void (*destroy)(void* buf) noexcept;
  };

  template <typename D>
  static D* Target(void* buf) {
    if constexpr (kStoredInline<D>) {
      return std::launder(reinterpret_cast<D*>(buf));
    } else {
      return *static_cast<D**>(buf);
    }
  }

  template <typename D>
  static constexpr Ops kOps = {
      [](void* buf, Args&&... args) -> R {
        return std::invoke(*Target<D>(buf), std::forward<Args>(args)...);
      },
      [](void* from, void* to) noexcept {
        if constexpr (kStoredInline<D>) {
          D* f = Target<D>(from);
          ::new (to) D(std::move(*f));
          f->~D();
        } else {
          *static_cast<D**>(to) = *static_cast<D**>(from);
        }
      },
      [](void* buf) noexcept {
        D* f = Target<D>(buf);
        f->~D();
        if constexpr (!kStoredInline<D>) RecyclingAllocator<D>().deallocate(f, 1);
      },
  };

  void MoveFrom(UniqueFunction& o) noexcept {
    if (o.ops_ == nullptr) return;
    o.ops_->move(o.buf_, buf_);
    ops_ = o.ops_;
    o.ops_ = nullptr;
  }
  void Reset() noexcept {
    // Cleared first: a callable whose destructor reaches this object again finds it empty.
    if (const Ops* ops = std::exchange(ops_, nullptr)) ops->destroy(buf_);
  }

  alignas(std::max_align_t) unsigned char buf_[kInlineBytes];
  const Ops* ops_ = nullptr;
};

}  // namespace petal
