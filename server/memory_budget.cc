#include "server/memory_budget.h"

#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dmlserve {

MemoryBudget::Reservation& MemoryBudget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    if (budget_ != nullptr) budget_->used_.fetch_sub(bytes_, std::memory_order_relaxed);
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

MemoryBudget::Reservation::~Reservation() {
  if (budget_ != nullptr) budget_->used_.fetch_sub(bytes_, std::memory_order_relaxed);
}

absl::StatusOr<MemoryBudget::Reservation> MemoryBudget::Reserve(uint64_t bytes) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "this request needs ", bytes,
          " bytes (its message, its output and the device's working memory), more than "
          "--max_inflight_bytes=",
          limit_, " allows"));
    }
    if (used > limit_ - bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("server busy: admitted requests hold ", used, " bytes and this one needs ",
                       bytes, " more, over --max_inflight_bytes=", limit_));
    }
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return Reservation(this, bytes);
}

}  // namespace dmlserve
