#ifndef DMLSERVE_SCHEDULER_JOB_H_
#define DMLSERVE_SCHEDULER_JOB_H_

#include <atomic>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "kernels/backend/device.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"

namespace dmlserve {

struct Batch;
struct Job;

// How a job ran, reported back to the client (ExecutionInfo).
struct ExecutionInfo {
  // The device's name (DeviceDescription::name): devices outlive every
  // answer the scheduler delivers.
  absl::string_view device;
  uint32_t batch_size = 0;
  absl::Duration queue_duration;
  absl::Duration compute_duration;
};

struct JobResult {
  absl::Status status;
  Tensor output;  // valid when status is OK
  ExecutionInfo info;
};

// Told when a waiting job is cancelled, so that it leaves the queue at once
// instead of when its batch would have started. Implemented by the scheduler.
class JobCancellationListener {
 public:
  virtual ~JobCancellationListener() = default;
  virtual void OnJobCancelled(Job& job) = 0;
};

// One request's work as the scheduler sees it.
//
// After a device ran it, the scheduler releases `operation` (it is empty when
// `done` is called), so that an output a device computed in place in an
// input's storage is the only holder of those bytes.
//
// The submitter keeps a shared_ptr and may call Cancel() at any time (client
// cancellation, or the client's deadline passing); a job cancelled while it
// waits completes at once with CANCELLED and is never computed. A job whose
// `deadline` passes, or whose cancelled_elsewhere turns true, while it waits
// completes (DEADLINE_EXCEEDED, CANCELLED) when its batch forms, uncomputed. `done` is called
// exactly once, from the submitting thread (a job run on it, see Device::MayRunOnCallerThread), a
// scheduler thread or the thread that cancelled it, and must not block.
struct Job : public WorkStopCheck {
  // While it runs: CANCELLED once cancelled, DEADLINE_EXCEEDED once its
  // deadline passed (a device polls it between blocks of long work).
  absl::Status Check() const override {
    if (is_cancelled()) return absl::CancelledError("cancelled while it ran");
    if (deadline != absl::InfiniteFuture() && absl::Now() >= deadline) {
      return absl::DeadlineExceededError("deadline passed while it ran");
    }
    return absl::OkStatus();
  }

  Operation operation;
  // The client's deadline. The scheduler judges it by its Clock before a
  // batch starts, and the device by absl::Now() while it runs: a Scheduler
  // on a FakeClock (clock.h) needs deadlines on the fake clock's timeline,
  // or none.
  absl::Time deadline = absl::InfiniteFuture();
  absl::AnyInvocable<void(JobResult)> done;

  void Cancel() {
    cancelled.store(true, std::memory_order_relaxed);
    if (JobCancellationListener* listener = cancellation_listener.load(std::memory_order_acquire)) {
      listener->OnJobCancelled(*this);
    }
  }
  bool is_cancelled() const {
    return cancelled.load(std::memory_order_relaxed) ||
           (cancelled_elsewhere && cancelled_elsewhere());
  }

  // Optional, set by the submitter: a cancellation it cannot push through
  // Cancel(), polled whenever the scheduler checks is_cancelled() (when a
  // batch forms). The unary RPC sets it to ask gRPC whether its call ended.
  absl::AnyInvocable<bool() const> cancelled_elsewhere;

  // Set by the scheduler.
  absl::Time enqueue_time;
  std::atomic<bool> cancelled{false};
  std::atomic<JobCancellationListener*> cancellation_listener{nullptr};
  // Guarded by the scheduler's mutex: the batch the job waits in (null once
  // it left the queue), and whether it was handed to a device before (a batch
  // re-run after a device failure does not count its jobs' wait twice).
  Batch* waiting_in = nullptr;
  bool started = false;
  int failed_attempts = 0;  // devices its batch failed on
};

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_JOB_H_
