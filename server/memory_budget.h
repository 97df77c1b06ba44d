#ifndef DMLSERVE_SERVER_MEMORY_BUDGET_H_
#define DMLSERVE_SERVER_MEMORY_BUDGET_H_

// A server-wide cap on the bytes that admitted requests hold: a request's own
// message, the output it will produce and the working memory a device needs
// for it (Device::WorkingBytes), from admission until its response has been
// handed to the client. Per-request limits alone do not bound
// memory, since many small requests can each ask for a large output.

#include <atomic>
#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/core/operation.h"

namespace dmlserve {

class MemoryBudget {
 public:
  // Holds its bytes until destroyed (or moved from).
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept : budget_(other.budget_), bytes_(other.bytes_) {
      other.budget_ = nullptr;
      other.bytes_ = 0;
    }
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation();

    uint64_t bytes() const { return bytes_; }

   private:
    friend class MemoryBudget;
    Reservation(MemoryBudget* budget, uint64_t bytes) : budget_(budget), bytes_(bytes) {}
    MemoryBudget* budget_ = nullptr;
    uint64_t bytes_ = 0;
  };

  explicit MemoryBudget(uint64_t limit_bytes) : limit_(limit_bytes) {}

  // RESOURCE_EXHAUSTED, naming --max_inflight_bytes, when `bytes` more would
  // go over the limit.
  absl::StatusOr<Reservation> Reserve(uint64_t bytes);

  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
};

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_MEMORY_BUDGET_H_
