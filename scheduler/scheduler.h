#ifndef DMLSERVE_SCHEDULER_SCHEDULER_H_
#define DMLSERVE_SCHEDULER_SCHEDULER_H_

// The dynamic batch scheduler.
//
// Jobs are grouped by compatibility key (compatibility_key.h) into pending
// batches. A batch closes when it holds max_batch_size jobs or max_batch_bytes
// bytes, or when its oldest job has waited max_queue_delay; closed batches go
// to a ready queue from which every device pulls when it has a free slot; a
// device with batches running leaves the next one to an idle device with
// fewer (least-outstanding-work placement), and a device prefers batches whose
// registered tensors are resident on it. Admission is bounded by max_queue.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "kernels/backend/device.h"
#include "scheduler/job.h"
#include "scheduler/scheduler_observer.h"

namespace dmlserve {

struct SchedulerOptions {
  int max_batch_size = 64;
  uint64_t max_batch_bytes = 64ull << 20;
  absl::Duration max_queue_delay = absl::Microseconds(200);
  int max_queue = 1024;  // jobs admitted and not yet started
};

struct DeviceStatus {
  DeviceDescription description;
  bool healthy = true;
  bool fallback = false;
  uint64_t memory_bytes = 0;
};

class Scheduler {
 public:
  // `devices` must not be empty. `observer` may be null; it must outlive the
  // scheduler. `fallback_devices` (e.g. the CPU behind GPUs) take work only
  // once every device in `devices` has failed, so a lost GPU never loses or
  // strands a request.
  Scheduler(const SchedulerOptions& options, std::vector<std::unique_ptr<Device>> devices,
            SchedulerObserver* observer,
            std::vector<std::unique_ptr<Device>> fallback_devices = {});
  ~Scheduler();  // Shutdown()

  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Admits a job. RESOURCE_EXHAUSTED when max_queue jobs are waiting,
  // UNAVAILABLE after Shutdown() began. On error `done` is not called.
  absl::Status Submit(std::shared_ptr<Job> job);

  // Stops admitting, runs every admitted job to completion, then stops the
  // device threads. Idempotent.
  void Shutdown();

  // Forwards a registry release to every device (drops resident copies).
  void EvictTensor(absl::string_view registered_id);

  std::vector<DeviceStatus> devices() const;
  const SchedulerOptions& options() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_SCHEDULER_H_
