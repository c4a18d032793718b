// FunctionRef<R(Args...)>: a non-owning reference to a callable, for parameters that are called
// only while the function that takes them runs (C++26's std::function_ref, cut down). Unlike
// std::function it never allocates: it holds the callable's address and one trampoline.
// Contract: the referenced callable must outlive every call through the FunctionRef; do not
// store one past the call that received it. Thread-safety: as the referenced callable's.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace petal {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
           !std::is_function_v<std::remove_reference_t<F>> &&  // a function: pass &f
           std::is_invocable_r_v<R, F&, Args...>)
      FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): binds like std::function
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* obj, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(obj))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

}  // namespace petal
