// Windows cross-build stand-in for Abseil (see ../../README.md).
#ifndef DMLSERVE_ABSL_SUBSET_STATUS_STATUSOR_H_
#define DMLSERVE_ABSL_SUBSET_STATUS_STATUSOR_H_

#include <cstdlib>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"

namespace absl {

template <typename T>
class [[nodiscard]] StatusOr {
  template <typename U>
  static constexpr bool kIsValue =
      std::is_constructible_v<T, U&&> && !std::is_same_v<std::decay_t<U>, Status> &&
      !std::is_same_v<std::decay_t<U>, StatusOr>;

 public:
  StatusOr() : status_(StatusCode::kUnknown, "") {}
  StatusOr(const Status& status) : status_(status) {
    if (status_.ok()) std::abort();  // as Abseil: an OK status needs a value
  }
  template <typename U, typename = std::enable_if_t<kIsValue<U>>>
  StatusOr(U&& value) : value_(std::in_place, std::forward<U>(value)) {}
  StatusOr(StatusOr&&) = default;
  StatusOr(const StatusOr&) = default;
  StatusOr& operator=(StatusOr&& other) {
    status_ = std::move(other.status_);
    value_.reset();
    if (other.value_) value_.emplace(std::move(*other.value_));
    return *this;
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    if (!ok()) std::abort();
    return *value_;
  }
  const T& value() const& {
    if (!ok()) std::abort();
    return *value_;
  }
  // `*std::move(status_or)` moves the value out (e.g. a vector of unique_ptr).
  T&& value() && { return std::move(value()); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(value()); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_STATUS_STATUSOR_H_
