// Windows cross-build stand-in for Abseil (see ../../README.md).
//
// A non-owning reference to a callable, as Abseil's: it must not outlive what
// it was made from (typically a lambda passed as an argument). Callables are
// invoked as const, as Abseil does.
#ifndef DMLSERVE_ABSL_SUBSET_FUNCTIONAL_FUNCTION_REF_H_
#define DMLSERVE_ABSL_SUBSET_FUNCTIONAL_FUNCTION_REF_H_

#include <functional>
#include <type_traits>
#include <utility>

namespace absl {

template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F,
            typename = std::enable_if_t<!std::is_same_v<F, FunctionRef> && !std::is_function_v<F> &&
                                        std::is_invocable_r_v<R, const F&, Args...>>>
  FunctionRef(const F& f) : invoker_(&InvokeObject<F>) {
    target_.object = &f;
  }
  // A function pointer is kept by value: the pointer itself may be a temporary.
  template <typename F, typename = std::enable_if_t<std::is_function_v<F> &&
                                                    std::is_invocable_r_v<R, F*, Args...>>>
  FunctionRef(F* f) : invoker_(&InvokeFunction<F>) {
    target_.function = reinterpret_cast<void (*)()>(f);
  }

  R operator()(Args... args) const { return invoker_(target_, std::forward<Args>(args)...); }

 private:
  union Target {
    const void* object;
    void (*function)();
  };
  template <typename F>
  static R InvokeObject(Target target, Args... args) {
    return static_cast<R>(
        std::invoke(*static_cast<const F*>(target.object), std::forward<Args>(args)...));
  }
  template <typename F>
  static R InvokeFunction(Target target, Args... args) {
    return static_cast<R>(
        std::invoke(reinterpret_cast<F*>(target.function), std::forward<Args>(args)...));
  }

  Target target_;
  R (*invoker_)(Target, Args...);
};

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_FUNCTIONAL_FUNCTION_REF_H_
