// Windows cross-build stand-in for Abseil (see ../../README.md).
//
// An owning, move-only callable wrapper: unlike std::function it holds
// move-only callables (lambdas capturing a unique_ptr or another
// AnyInvocable). Only the signatures dmlserve uses: `R(Args...)`, invoking
// the callable as non-const, and `R(Args...) const`, as const. A null
// function pointer makes an empty one, as in Abseil.
#ifndef DMLSERVE_ABSL_SUBSET_FUNCTIONAL_ANY_INVOCABLE_H_
#define DMLSERVE_ABSL_SUBSET_FUNCTIONAL_ANY_INVOCABLE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace absl {
namespace subset_internal {

template <bool kConst, typename R, typename... Args>
class AnyInvocableBase {
  template <typename F>
  using Invoked = std::conditional_t<kConst, const std::decay_t<F>&, std::decay_t<F>&>;

 public:
  AnyInvocableBase() noexcept = default;
  AnyInvocableBase(std::nullptr_t) noexcept {}
  template <typename F,
            typename = std::enable_if_t<!std::is_base_of_v<AnyInvocableBase, std::decay_t<F>> &&
                                        std::is_invocable_r_v<R, Invoked<F>, Args...>>>
  AnyInvocableBase(F&& f) {
    using Stored = std::remove_reference_t<F>;
    if constexpr (std::is_pointer_v<Stored> || std::is_member_pointer_v<Stored>) {
      if (f == nullptr) return;
    }
    callable_ = std::make_unique<Holder<std::decay_t<F>>>(std::forward<F>(f));
  }
  AnyInvocableBase(AnyInvocableBase&&) noexcept = default;
  AnyInvocableBase& operator=(AnyInvocableBase&&) noexcept = default;

  explicit operator bool() const noexcept { return callable_ != nullptr; }
  friend bool operator==(const AnyInvocableBase& f, std::nullptr_t) noexcept { return !f; }
  friend bool operator!=(const AnyInvocableBase& f, std::nullptr_t) noexcept { return !!f; }

 protected:
  // Calling an empty one is undefined, as in Abseil.
  R Call(Args&&... args) const { return callable_->Invoke(std::forward<Args>(args)...); }

 private:
  struct Callable {
    virtual ~Callable() = default;
    virtual R Invoke(Args&&... args) = 0;
  };
  template <typename F>
  struct Holder final : Callable {
    template <typename G>
    explicit Holder(G&& g) : f(std::forward<G>(g)) {}
    R Invoke(Args&&... args) override {
      return static_cast<R>(std::invoke(static_cast<Invoked<F>>(f), std::forward<Args>(args)...));
    }
    F f;
  };

  std::unique_ptr<Callable> callable_;
};

}  // namespace subset_internal

template <typename Signature>
class AnyInvocable;

template <typename R, typename... Args>
class AnyInvocable<R(Args...)> : public subset_internal::AnyInvocableBase<false, R, Args...> {
 public:
  using subset_internal::AnyInvocableBase<false, R, Args...>::AnyInvocableBase;
  R operator()(Args... args) { return this->Call(std::forward<Args>(args)...); }
};

template <typename R, typename... Args>
class AnyInvocable<R(Args...) const> : public subset_internal::AnyInvocableBase<true, R, Args...> {
 public:
  using subset_internal::AnyInvocableBase<true, R, Args...>::AnyInvocableBase;
  R operator()(Args... args) const { return this->Call(std::forward<Args>(args)...); }
};

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_FUNCTIONAL_ANY_INVOCABLE_H_
