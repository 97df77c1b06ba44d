#ifndef DMLSERVE_KERNELS_CORE_CHECK_H_
#define DMLSERVE_KERNELS_CORE_CHECK_H_

// Checked contracts: DMLSERVE_DCHECK(condition) states a precondition or
// invariant that callers (or tables built at startup) must keep, and checks
// it where the build asks for it. Abseil's logging (ABSL_DCHECK and kin) is
// not in the Abseil that Debian 12 ships (20220623), so this is the
// project's own, kept to the one macro.
//
// Contract:
//   DMLSERVE_DCHECK(condition)
//     With DMLSERVE_CHECK_CONTRACTS defined to a non-zero value (the CMake
//     option of that name, ON by default, defines it as 1 for every project
//     target): evaluates `condition` once; when it is false, prints
//     "file:line: DMLSERVE_DCHECK failed: condition" to stderr and aborts.
//     Otherwise: compiles to nothing and does not evaluate `condition`, but
//     still type-checks it (an unevaluated sizeof), so a check cannot rot in
//     builds that skip it and the variables it names count as used.
//   Either way an expression of type void, usable as a statement anywhere a
//   function call is. `condition` must be contextually convertible to bool
//   and should have no side effects (they happen only in checked builds).
//
// Checks are meant to be cheap where they run: once per call of a kernel,
// or once when a table is built, never inside an inner loop.
//
// The failure path is a function of its own, marked noreturn and cold, so a
// check costs its caller a compare and a not-taken branch.

#include <cstdio>
#include <cstdlib>

#if defined(DMLSERVE_CHECK_CONTRACTS) && DMLSERVE_CHECK_CONTRACTS

#define DMLSERVE_DCHECK(condition)    \
  ((condition) ? static_cast<void>(0) \
               : ::dmlserve::check_internal::CheckFailed(__FILE__, __LINE__, #condition))

#else

#define DMLSERVE_DCHECK(condition) static_cast<void>(sizeof(static_cast<bool>(condition)))

#endif

namespace dmlserve::check_internal {

#if defined(__GNUC__)
#define DMLSERVE_CHECK_FAILED_ATTRIBUTES __attribute__((noinline, cold))
#else
#define DMLSERVE_CHECK_FAILED_ATTRIBUTES
#endif

[[noreturn]] DMLSERVE_CHECK_FAILED_ATTRIBUTES inline void CheckFailed(const char* file, int line,
                                                                      const char* condition) {
  std::fprintf(stderr, "%s:%d: DMLSERVE_DCHECK failed: %s\n", file, line, condition);
  std::fflush(stderr);
  std::abort();
}

}  // namespace dmlserve::check_internal

#endif  // DMLSERVE_KERNELS_CORE_CHECK_H_
