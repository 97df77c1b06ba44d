#ifndef DMLSERVE_SCHEDULER_DISPATCH_POLICY_H_
#define DMLSERVE_SCHEDULER_DISPATCH_POLICY_H_

// The scheduler's latency policy in one place: where an arriving job runs,
// when a batch waits for company, whom to wake, and when a sleeping worker
// looks at the queue again.
//
// Pure: no threads, no locks, no clock of its own. The scheduler calls it
// under its mutex with the time it read from its Clock (clock.h), and does
// what it answers:
//  - Arrive:  run the job here now (on the submitting thread, on an idle
//             device), or queue it, with the company its batch holds for;
//  - Queued:  with the job queued, run a batch here now (the arrival ended a
//             hold), wake a worker, or nothing (a hold whose end a worker
//             will see in time, or work a busy device may not start yet);
//  - Take:    which waiting batch a device takes (placed by cost: only one
//             that finishes first there, the device where it would being
//             woken for it);
//  - NextLook: when a waiting worker wakes on its own (a due time, a hold's
//             end plus the backstop, or never: only when woken).
//
// The rules, and why:
//  - An idle device takes work at once; a cheap job (Device::
//    MayRunOnCallerThread) runs on the submitting thread, which saves the
//    hand-off to a worker (most of its latency at low load).
//  - The load signal is a moving average over recent arrivals of whether
//    each found work waiting or no device idle. Under load (half or more),
//    a job whose device says it pays to run in company (PreferredCompany: a
//    row against a large shared B) opens a *held* batch (BatchQueue) rather
//    than running alone. At low load no job ever waits for company.
//  - A held batch ends on the thread of the first job to arrive after
//    max_queue_delay, with no thread woken for it: each wake of a sleeping
//    thread costs 10-15 µs of CPU on a small VM (BM_ThreadHandoff). The idle
//    device's worker is only the backstop, for a hold whose arrivals stop:
//    while holds keep beginning it looks every `hold_backstop`, and it is
//    woken for a hold only when it would not look by the hold's end plus
//    `hold_backstop`. A held job waits at most max_queue_delay +
//    hold_backstop. Zero backstop: the worker times every hold itself.
//  - A due time needs no worker while a submitting thread runs batches: it
//    looks at the queue after each one and wakes a worker for what it
//    leaves.

#include <cstdint>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "kernels/core/operation.h"
#include "scheduler/batch_queue.h"
#include "scheduler/device_pool.h"

namespace dmlserve {

class DispatchPolicy {
 public:
  struct Options {
    absl::Duration hold_backstop = absl::Milliseconds(1);
    // False under fault injection (SchedulerOptions::injected_batch_delay):
    // no arrival finds an idle device, so nothing runs on a submitting
    // thread and every batch waits on a worker.
    bool arrivals_take_idle_devices = true;
  };

  explicit DispatchPolicy(const Options& options) : options_(options) {}

  // Where a job arriving at `now` goes. `operation` is the job's.
  struct Arrival {
    DevicePool::Slot* idle = nullptr;  // an idle device that runs it, if any
    bool run_here = false;             // alone, on this thread, on `idle`
    int company = 0;                   // when queued: > 1 holds its batch
    bool busy = false;                 // the load signal, for BusyCoresScope
    // Placement::kCost: where it would finish first (the device to wake for
    // it); null otherwise.
    DevicePool::Slot* preferred = nullptr;
    // `preferred` runs a trial of the job's operator (DevicePool::OnTrial):
    // the job waits for it to end, and waking the device would be in vain.
    bool preferred_on_trial = false;
  };
  Arrival Arrive(const Operation& operation, OperatorKind kind, absl::Time now,
                 const BatchQueue& queue, DevicePool& pool);

  // What the submitting thread does once the job is queued (BatchQueue::Add
  // with arrival.company). `was_empty` and `was_runnable_for_busy`
  // (HasRunnable(now, false)) describe the queue before the job.
  enum class AfterQueue {
    kNothing,
    kWakeOne,   // DevicePool::WakeOne(true, arrival.preferred)
                // (never when arrival.preferred_on_trial)
    kTakeHere,  // take a cheap batch for arrival.idle and run it here
  };
  AfterQueue Queued(const Arrival& arrival, bool was_empty, bool was_runnable_for_busy,
                    absl::Time now, const BatchQueue& queue, const DevicePool& pool);

  // The batch `slot` takes from `queue` at `now` (BatchQueue::Take), or
  // null: one of an operator the pool lets it run (DevicePool::OnlyFor) that
  // `accept` takes and, placed by cost, that finishes first on `slot`
  // (DevicePool::Prefers); when it declines one for that reason, the device
  // where the first such batch finishes first is woken.
  std::unique_ptr<Batch> Take(DevicePool::Slot& slot, absl::Time now,
                              absl::FunctionRef<bool(const Batch&)> accept, BatchQueue& queue,
                              DevicePool& pool) const;

  // Wakes a worker for what waits in `queue` (a batch that may start now,
  // or a due time to arm). With Placement::kCost: one of each device where
  // one of the first few batches (BatchQueue::UpcomingBatches) finishes
  // first, so that a device that would only decline them (a GPU for tiny
  // batches) sleeps on, while one that is best for a later batch wakes even
  // when the first batch's best device is busy. Otherwise, and when no batch
  // may start yet, DevicePool::WakeOne's own rule.
  void WakeForQueue(absl::Time now, const BatchQueue& queue, DevicePool& pool) const;

  // After a submitting thread ran a batch on `slot`: whether to wake a
  // worker for what waits. `continues`: it takes another batch itself.
  bool WakeAfterCallerBatch(const DevicePool::Slot& slot, bool continues, absl::Time now,
                            const BatchQueue& queue, const DevicePool& pool) const;

  // When a waiting worker of `slot` next looks at the queue on its own
  // (InfiniteFuture: only when woken). `should_take`: DevicePool::
  // ShouldTake. `holds_seen`: the worker's count of holds at its last look,
  // updated.
  absl::Time NextLook(const DevicePool::Slot& slot, bool should_take, absl::Time now,
                      uint64_t& holds_seen, const BatchQueue& queue, const DevicePool& pool) const;

  // Whether all that waits is a batch in its hold, and a worker of `slot`
  // will look at the queue by the hold's end plus the backstop unwoken.
  bool HoldCovered(const DevicePool::Slot& slot, absl::Time now, const BatchQueue& queue,
                   const DevicePool& pool) const;

  bool under_load() const { return busy_arrivals_ >= kLoadScale / 2; }
  uint64_t holds_begun() const { return holds_begun_; }

  // Submitting threads running batches (Scheduler::RunOnCaller), each of
  // which looks at the queue again after every batch.
  void CallerLoopBegins() { ++caller_loops_; }
  void CallerLoopEnds() { --caller_loops_; }

 private:
  void NoteArrival(bool found_work) {
    busy_arrivals_ += ((found_work ? kLoadScale : 0) - busy_arrivals_) / kLoadWindow;
  }
  static constexpr int kLoadScale = 1 << 16;
  static constexpr int kLoadWindow = 8;  // arrivals, roughly

  const Options options_;
  int busy_arrivals_ = 0;  // in 1/kLoadScale
  uint64_t holds_begun_ = 0;
  int caller_loops_ = 0;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_DISPATCH_POLICY_H_
