#ifndef DMLSERVE_SCHEDULER_JOB_H_
#define DMLSERVE_SCHEDULER_JOB_H_

#include <atomic>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"

namespace dmlserve {

// How a job ran, reported back to the client (ExecutionInfo).
struct ExecutionInfo {
  std::string device;
  uint32_t batch_size = 0;
  absl::Duration queue_duration;
  absl::Duration compute_duration;
};

struct JobResult {
  absl::Status status;
  Tensor output;  // valid when status is OK
  ExecutionInfo info;
};

// One request's work as the scheduler sees it.
//
// The submitter keeps a shared_ptr and may call Cancel() at any time (client
// cancellation); a job cancelled before its batch starts is not computed.
// `done` is called exactly once, from a scheduler or device thread, and must
// not block.
struct Job {
  Operation operation;
  absl::Time deadline = absl::InfiniteFuture();
  absl::AnyInvocable<void(JobResult)> done;

  void Cancel() { cancelled.store(true, std::memory_order_relaxed); }
  bool is_cancelled() const { return cancelled.load(std::memory_order_relaxed); }

  // Set by the scheduler.
  absl::Time enqueue_time;
  std::atomic<bool> cancelled{false};
};

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_JOB_H_
