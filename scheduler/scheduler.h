#ifndef DMLSERVE_SCHEDULER_SCHEDULER_H_
#define DMLSERVE_SCHEDULER_SCHEDULER_H_

// The dynamic batch scheduler: admission, threads and failure handling, and
// the glue between its parts.
//
//  - batch_queue.h (the batching policy): jobs grouped by compatibility key
//    (compatibility_key.h) into batches; an idle device takes the oldest at
//    once, a busy device with room only a full or max_queue_delay-old one.
//  - dispatch_policy.h (the latency policy): whether an arriving job runs on
//    its own thread, waits in the queue (and whom to wake) or is held for
//    company, and which batch a device takes; clocked from outside
//    (clock.h).
//  - device_pool.h (placement and health): which devices serve, which takes
//    the next batch (least loaded, or where it finishes first by each
//    device's cost_model.h, seeded by calibration.h), which worker to wake,
//    and probing a failed device until it recovers.
//  - failover.h: where the jobs of a batch go when its device fails.
//  - here: Submit (admission bounded by max_queue; a cheap job on an idle
//    device runs on the submitting thread, see Device::MayRunOnCallerThread,
//    and so does a held batch, on the thread of the job that ends its hold),
//    one worker thread per device slot pulling batches, one function that
//    runs a batch and answers its jobs wherever it runs (RunAndFinish),
//    device failures, cancellation and shutdown.
//
// A device prefers batches whose registered tensors are resident on it
// (BatchQueue::Take); EvictTensor forwards registry releases to every device.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kernels/backend/device.h"
#include "scheduler/batch.h"
#include "scheduler/batch_execution.h"
#include "scheduler/batch_limits.h"
#include "scheduler/batch_queue.h"
#include "scheduler/clock.h"
#include "scheduler/cost_model.h"
#include "scheduler/device_pool.h"
#include "scheduler/dispatch_policy.h"
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

class Scheduler : private JobCancellationListener {
 public:
  // `devices` must not be empty. `observer` may be null; it must outlive the
  // scheduler. `fallback_devices` (e.g. the CPU behind GPUs) take work only
  // once every device in `devices` has failed, so a lost GPU never loses or
  // strands a request. Returns once every device worker thread has started
  // and waits for work.
  Scheduler(const SchedulerOptions& options, std::vector<std::unique_ptr<Device>> devices,
            SchedulerObserver* observer,
            std::vector<std::unique_ptr<Device>> fallback_devices = {});
  ~Scheduler() override;  // Shutdown()

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
  const SchedulerOptions& options() const { return options_; }

 private:
  using Slot = DevicePool::Slot;

  void WorkerLoop(Slot* slot);
  // Runs `batch` on the submitting thread, on `slot` claimed for it, then
  // (up to kMaxBatchesOnCaller in all) batches of cheap jobs that queued
  // while it ran: they fuse as they would on a worker, without a hand-off.
  // `busy`: the load signal when `batch` was taken
  // (DispatchPolicy::under_load), passed to the device as a BusyCoresScope.
  void RunOnCaller(Slot* slot, std::unique_ptr<Batch> batch, bool busy);
  // The one way a batch runs, on a worker or a submitting thread: runs
  // `batch` on `slot` (claimed for it by TakeLocked or Submit) outside the
  // lock, gives the device back (FinishBatchLocked), reports a device it
  // took out of rotation, completes what did not run, then delivers the
  // answers. `busy`: the load signal, passed to the device as a
  // BusyCoresScope. Returns false when the device failed (the batch's jobs
  // were requeued, or failed when no device is left).
  bool RunAndFinish(Slot* slot, std::unique_ptr<Batch> batch, bool busy) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes the batch `slot` should run next, or null; `accept` may refuse a
  // batch. Completes its expired and cancelled jobs into `unrun` (null
  // when none is left) and counts it as running on `slot`.
  std::unique_ptr<Batch> TakeLocked(Slot* slot, absl::Time now,
                                    absl::FunctionRef<bool(const Batch&)> accept,
                                    std::vector<UnrunJob>& unrun)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Delivers `answers` of a batch that ran (FinishBatchLocked counted them in
  // delivering_), outside the lock.
  void DeliverAnswers(Answers& answers);
  // Accounts for a batch that left `slot`: it ran (`measured`, what the
  // device's cost model learns from; null when the device ran nothing), or
  // failed with `failure` (then takes the device out and hands the batch to
  // FailOver). Returns whether this
  // call took the device out.
  bool FinishBatchLocked(Slot* slot, std::unique_ptr<Batch> batch, const absl::Status& failure,
                         const DevicePool::Measured* measured, std::vector<UnrunJob>& unrun)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes a cancelled job that still waits (JobCancellationListener).
  void OnJobCancelled(Job& job) override;
  void NoteDepthLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reports the latest depth; never under mu_, so an observer may call back.
  void ReportDepth();

  const SchedulerOptions options_;
  SchedulerObserver* const observer_;
  const Clock* const clock_;

  mutable absl::Mutex mu_;
  BatchQueue queue_ ABSL_GUARDED_BY(mu_);
  DevicePool pool_ ABSL_GUARDED_BY(mu_);
  DispatchPolicy policy_ ABSL_GUARDED_BY(mu_);
  // Runs whose answers are not yet delivered (Run to DeliverAnswers):
  // shutdown waits for them too.
  int delivering_ ABSL_GUARDED_BY(mu_) = 0;

  // Written under mu_, read by ReportDepth.
  std::atomic<int> depth_{0};
  absl::Mutex report_mu_;

  std::vector<std::thread> threads_;
  std::once_flag shutdown_once_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_SCHEDULER_H_
