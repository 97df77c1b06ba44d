#ifndef DMLSERVE_SCHEDULER_SCHEDULER_H_
#define DMLSERVE_SCHEDULER_SCHEDULER_H_

// The dynamic batch scheduler: admission, and the glue between its parts.
//
//  - batch_queue.h (the batching policy): jobs grouped by compatibility key
//    (compatibility_key.h) into batches; an idle device takes the oldest at
//    once, a busy device with room only a full or max_queue_delay-old one.
//  - device_pool.h (placement and health): which devices serve, which takes
//    the next batch (least loaded), which worker to wake, and probing a
//    failed device until it recovers.
//  - here: Submit (admission bounded by max_queue; a cheap job on an idle
//    device runs on the submitting thread, see Device::MayRunOnCallerThread,
//    and so does a held batch, on the thread of the job that ends its hold),
//    one worker thread per device slot pulling batches, one function that
//    runs a batch and answers its jobs wherever it runs (RunAndFinish),
//    device failures (the batch runs again elsewhere), cancellation and
//    shutdown.
//
// A device prefers batches whose registered tensors are resident on it
// (BatchQueue::Take); EvictTensor forwards registry releases to every device.

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "kernels/backend/device.h"
#include "scheduler/batch_limits.h"
#include "scheduler/clock.h"
#include "scheduler/cost_model.h"
#include "scheduler/device_pool.h"
#include "scheduler/job.h"
#include "scheduler/scheduler_observer.h"

namespace dmlserve {

struct SchedulerOptions {
  BatchLimits batch;
  // Under sustained load, a batch held for company (see BatchQueue) ends on
  // the thread of the first job to arrive after max_queue_delay, with no
  // thread woken for it: each wake of a sleeping thread costs 10-15 µs of CPU
  // on a small VM (BM_ThreadHandoff), and a hold timed by a device worker
  // costs two. The idle worker is only the backstop, for a hold whose
  // arrivals stop: while holds keep beginning it looks at the queue every
  // `hold_backstop`, and it is woken for a hold only when it would not look
  // by the hold's end plus `hold_backstop`. A held job therefore waits at
  // most max_queue_delay + hold_backstop, and max_queue_delay while jobs keep
  // arriving. Zero: the worker times every hold itself (one wake to arm it,
  // one when it ends).
  absl::Duration hold_backstop = absl::Milliseconds(1);
  int max_queue = 1024;  // jobs admitted and not yet started
  // Devices a job's batch may fail on (each failure takes that device out of
  // rotation) before the job itself fails UNAVAILABLE instead of moving on:
  // one batch that makes devices fail (a hang, a fence that never signals)
  // then costs at most this many devices, not all of them.
  int max_attempts = 2;
  // How often a device taken out of rotation is probed (Device::Recover)
  // until it serves again. Zero: a failed device stays out for good.
  absl::Duration reprobe_interval = absl::Seconds(30);
  // Fault injection for tests: every batch waits this long on its device
  // thread before it runs, as behind a long kernel, so that tests of a busy
  // server (queued, cancelled, expired requests) need no real long work.
  // Cheap jobs then never run on the submitting thread. The server sets it
  // from DMLSERVE_INJECT_BATCH_DELAY_US; 0 (off) otherwise.
  absl::Duration injected_batch_delay = absl::ZeroDuration();
  // Where the scheduler reads the time (null: the real clock). Must outlive
  // the scheduler.
  const Clock* clock = nullptr;
  // Which device takes a batch (device_pool.h): the least loaded, fallbacks
  // behind the primaries (--placement=gpu_first), or where it finishes first,
  // every device a peer (--placement=cost; with several devices, the
  // constructor first calibrates each one, calibration.h).
  Placement placement = Placement::kLeastLoaded;
};

struct DeviceStatus {
  DeviceDescription description;
  bool healthy = true;
  bool fallback = false;
  // What a batch of each operator is estimated to cost there (indexed by
  // OperatorKind): learned from every batch, and calibrated at start-up
  // with Placement::kCost, which places batches by it.
  std::array<CostLine, kOperatorKindCount> costs;
  uint64_t memory_bytes = 0;
  uint64_t resident_bytes = 0;  // of which registered tensors' resident copies
};

class Scheduler {
 public:
  // `devices` must not be empty. `observer` may be null; it must outlive the
  // scheduler. `fallback_devices` (e.g. the CPU behind GPUs) take work only
  // once every device in `devices` has failed, so a lost GPU never loses or
  // strands a request. Returns once every device worker thread has started
  // and waits for work.
  Scheduler(const SchedulerOptions& options, std::vector<std::unique_ptr<Device>> devices,
            SchedulerObserver* observer,
            std::vector<std::unique_ptr<Device>> fallback_devices = {});
  ~Scheduler();  // Shutdown()

  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Admits a job. RESOURCE_EXHAUSTED when max_queue jobs are waiting,
  // UNAVAILABLE after Shutdown() began. On error `done` is not called. On
  // success `done` may already have been called, on this thread, before
  // Submit returns (a cheap job an idle device ran here).
  absl::Status Submit(std::shared_ptr<Job> job);

  // Stops admitting, runs every admitted job to completion, then stops the
  // device threads. Idempotent.
  void Shutdown();

  // The most memory any of the devices needs to run `operation` beyond its
  // operands and output (Device::WorkingBytes), for admission. Thread-safe.
  uint64_t WorkingBytes(const Operation& operation) const;

  // Forwards a registry release to every device (drops resident copies).
  // Takes no scheduler lock: safe from any thread, also from where a job
  // is dropped.
  void EvictTensor(absl::string_view registered_id);

  std::vector<DeviceStatus> devices() const;
  const SchedulerOptions& options() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_SCHEDULER_H_
