#include "scheduler/scheduler.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "kernels/backend/execution_hints.h"
#include "kernels/core/check.h"
#include "kernels/core/operation.h"
#include "scheduler/batch.h"
#include "scheduler/batch_execution.h"
#include "scheduler/batch_queue.h"
#include "scheduler/calibration.h"
#include "scheduler/clock.h"
#include "scheduler/cost_model.h"
#include "scheduler/device_pool.h"
#include "scheduler/dispatch_policy.h"

namespace dmlserve {
namespace {

// How many batches a submitting thread runs in a row (its own job, then
// batches that queued meanwhile) before it leaves the rest to the device's
// workers and returns to gRPC, whose connections it also serves.
constexpr int kMaxBatchesOnCaller = 4;

// Placed by cost, how often a worker that left every waiting batch to a
// device that finishes it sooner looks at the queue again unwoken.
constexpr absl::Duration kDeclinedRecheck = absl::Milliseconds(50);

}  // namespace

class Scheduler::Impl : public JobCancellationListener {
 public:
  Impl(const SchedulerOptions& options, std::vector<std::unique_ptr<Device>> devices,
       SchedulerObserver* observer, std::vector<std::unique_ptr<Device>> fallback_devices);
  ~Impl() override { Shutdown(); }

  absl::Status Submit(std::shared_ptr<Job> job);
  void Shutdown();
  void EvictTensor(absl::string_view registered_id);
  uint64_t WorkingBytes(const Operation& operation) const {
    // No lock: the pool's devices are fixed at construction.
    uint64_t most = 0;
    for (size_t i = 0; i < pool_.size(); ++i) {
      most = std::max(most, pool_.at(i).device->WorkingBytes(operation));
    }
    return most;
  }
  std::vector<DeviceStatus> devices() const;
  const SchedulerOptions& options() const { return options_; }

  void OnJobCancelled(Job& job) override;

 private:
  using Slot = DevicePool::Slot;

  void WorkerLoop(Slot* slot);
  // kCost: when a batch of `units` of `kind` started at `now` on `slot` is
  // estimated to end.
  absl::Time EstimatedEnd(const Slot& slot, OperatorKind kind, double units, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (pool_placement_ != Placement::kCost) return absl::InfiniteFuture();
    return now + slot.cost.Estimate(kind, units, now);
  }
  // Runs `batch` on the submitting thread, on `slot` claimed for it, then
  // (up to kMaxBatchesOnCaller in all) batches of cheap jobs that queued
  // while it ran: they fuse as they would on a worker, without a hand-off.
  // `busy`: the load signal when `batch` was taken (DispatchPolicy::under_load), passed
  // to the device as a BusyCoresScope.
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
  void DeliverAnswers(std::vector<Answer>& answers);
  // Accounts for a batch that left `slot` (ran, or failed with `failure`):
  // requeues the batch of a failed device, or fails its jobs when no device
  // is left. Returns whether this call took the device out.
  bool FinishBatchLocked(Slot* slot, std::unique_ptr<Batch> batch, const absl::Status& failure,
                         std::vector<UnrunJob>& unrun) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // In a mixed pool, after a device failed: fails the waiting jobs of every
  // operator no serving device runs any more (none would ever take them).
  void FailUnservableLocked(std::vector<UnrunJob>& unrun) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (int i = 0; i < kOperatorKindCount; ++i) {
      const auto kind = static_cast<OperatorKind>(i);
      if (!pool_.AnySupports(kind) || pool_.CanServe(kind)) continue;
      const absl::Status status = absl::UnavailableError(absl::StrCat(
          "no healthy device left that runs ", OperatorName(kind), ": ", pool_.last_failure()));
      for (auto& job : queue_.RemoveAll(kind)) unrun.push_back({std::move(job), status});
    }
  }
  // Accepts a batch whose every job may run on a submitting thread.
  static auto CheapOn(const Device& device) {
    return [&device](const Batch& candidate) {
      for (const auto& job : candidate.jobs) {
        if (!device.MayRunOnCallerThread(job->operation)) return false;
      }
      return true;
    };
  }
  void NoteDepthLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    depth_.store(static_cast<int>(queue_.job_count()), std::memory_order_relaxed);
  }
  // Reports the latest depth; never under mu_, so an observer may call back.
  void ReportDepth();

  const SchedulerOptions options_;
  SchedulerObserver* const observer_;
  const Clock* const clock_;
  const Placement pool_placement_;  // pool_.placement(), read without the lock

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

Scheduler::Impl::Impl(const SchedulerOptions& options, std::vector<std::unique_ptr<Device>> devices,
                      SchedulerObserver* observer,
                      std::vector<std::unique_ptr<Device>> fallback_devices)
    : options_(options),
      observer_(observer),
      clock_(options.clock != nullptr ? options.clock : Clock::Real()),
      pool_placement_(options.placement),
      queue_(options.batch),
      pool_(std::move(devices), std::move(fallback_devices), options.placement),
      policy_(
          {options.hold_backstop,
           /*arrivals_take_idle_devices=*/options.injected_batch_delay <= absl::ZeroDuration()}) {
  std::vector<Slot*> workers;
  {
    absl::MutexLock lock(&mu_);
    // Placed by cost among several devices: each one's estimates start from
    // a calibration (before any worker runs, so it has the device to
    // itself). A device that cannot run it is not fit to serve: it is out of
    // rotation from the start, and probed as any failed device.
    if (pool_.placement() == Placement::kCost && pool_.size() > 1) {
      for (size_t i = 0; i < pool_.size(); ++i) {
        Slot& slot = pool_.at(i);
        if (absl::Status calibrated = Calibrate(*slot.device, slot.cost); !calibrated.ok()) {
          pool_.MarkFailed(slot, calibrated);
        }
      }
    }
    for (size_t i = 0; i < pool_.size(); ++i) {
      for (int j = 0; j < pool_.at(i).workers; ++j) workers.push_back(&pool_.at(i));
    }
  }
  for (Slot* slot : workers) threads_.emplace_back([this, slot] { WorkerLoop(slot); });
  // Returns once every worker waits for work, so the first jobs find the
  // workers as every later job does (asleep until woken), not still starting.
  const int total = static_cast<int>(workers.size());
  auto all_waiting = [this, total]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int waiting = 0;
    for (size_t i = 0; i < pool_.size(); ++i) waiting += pool_.at(i).waiting;
    return waiting == total;
  };
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&all_waiting));
}

absl::Status Scheduler::Impl::Submit(std::shared_ptr<Job> job) {
  if (job == nullptr || !job->done) {
    return absl::InvalidArgumentError("a job needs a completion callback");
  }
  // The key hashes an inline B and the sizes walk the operands: done before
  // taking the lock, which then does O(1) work.
  CompatibilityKey key = CompatibilityKey::For(job->operation);
  const OperatorKind kind = key.kind();
  // Fixed at construction: read without the lock.
  if (!pool_.AnySupports(kind)) {
    return absl::UnimplementedError(
        absl::StrCat("no device of this server runs ", OperatorName(kind)));
  }
  const uint64_t own_bytes = OperationBytes(job->operation) - SharedOperandBytes(job->operation);
  mu_.Lock();
  absl::Status refused = pool_.Refusal(kind);
  if (refused.ok() && static_cast<int>(queue_.job_count()) >= options_.max_queue) {
    refused = absl::ResourceExhaustedError(
        absl::StrCat("queue full: ", queue_.job_count(), " jobs waiting (--max_queue)"));
  }
  if (!refused.ok()) {
    mu_.Unlock();
    return refused;
  }
  const absl::Time now = clock_->Now();
  job->enqueue_time = now;
  const DispatchPolicy::Arrival arrival = policy_.Arrive(job->operation, kind, now, queue_, pool_);
  if (arrival.run_here) {
    pool_.Claim(*arrival.idle,
                EstimatedEnd(*arrival.idle, kind,
                             JobWorkUnits(job->operation) + SharedWorkUnits(job->operation), now));
    policy_.CallerLoopBegins();
    mu_.Unlock();
    auto batch = std::make_unique<Batch>(std::move(key));
    batch->Add(std::move(job), own_bytes);
    RunOnCaller(arrival.idle, std::move(batch), arrival.busy);
    return absl::OkStatus();
  }
  const bool was_empty = queue_.empty();
  const bool was_runnable_for_busy = queue_.HasRunnable(now, /*idle=*/false);
  job->cancellation_listener.store(this, std::memory_order_release);
  queue_.Add(job, std::move(key), own_bytes, arrival.company);
  NoteDepthLocked();
  std::unique_ptr<Batch> batch;
  std::vector<UnrunJob> unrun;
  switch (policy_.Queued(arrival, was_empty, was_runnable_for_busy, now, queue_, pool_)) {
    case DispatchPolicy::AfterQueue::kNothing:
      break;
    case DispatchPolicy::AfterQueue::kWakeOne:
      pool_.WakeOne(/*busy_may_take=*/true, arrival.preferred);
      break;
    case DispatchPolicy::AfterQueue::kTakeHere:
      batch = TakeLocked(arrival.idle, now, CheapOn(*arrival.idle->device), unrun);
      if (batch != nullptr) policy_.CallerLoopBegins();
      if (!queue_.empty()) pool_.WakeOne(/*busy_may_take=*/true);
      break;
  }
  const bool busy = policy_.under_load();
  mu_.Unlock();
  ReportDepth();
  CompleteUnrun(unrun);
  if (batch != nullptr) RunOnCaller(arrival.idle, std::move(batch), busy);
  // Cancelled before the listener was set: it never saw the cancellation.
  if (job->is_cancelled()) OnJobCancelled(*job);
  return absl::OkStatus();
}

void Scheduler::Impl::OnJobCancelled(Job& job) {
  std::shared_ptr<Job> removed;
  {
    absl::MutexLock lock(&mu_);
    removed = queue_.Remove(&job);
    if (removed == nullptr) return;  // already started (or finished)
    removed->cancellation_listener.store(nullptr, std::memory_order_relaxed);
    NoteDepthLocked();
  }
  ReportDepth();
  std::vector<UnrunJob> unrun;
  unrun.push_back({std::move(removed), absl::CancelledError("cancelled before it started")});
  CompleteUnrun(unrun);
}

void Scheduler::Impl::ReportDepth() {
  if (observer_ == nullptr) return;
  // Reading the depth under report_mu_ makes the last report carry the latest
  // value even when reports from different threads race.
  absl::MutexLock lock(&report_mu_);
  observer_->OnQueueDepth(depth_.load(std::memory_order_relaxed));
}

void Scheduler::Impl::WorkerLoop(Slot* slot) {
  std::vector<UnrunJob> unrun;
  uint64_t holds_seen = 0;
  mu_.Lock();
  for (;;) {
    if (!slot->healthy) {
      if (!pool_.AwaitRecovery(*slot, &mu_, options_.reprobe_interval, observer_)) break;
      continue;
    }
    const absl::Time now = clock_->Now();
    const bool should_take = pool_.ShouldTake(*slot);
    if (!should_take || !queue_.HasRunnable(now, slot->idle(), pool_.OnlyFor(*slot))) {
      if (pool_.stopping() && queue_.empty() && pool_.inflight_batches() == 0 && delivering_ == 0) {
        break;
      }
      pool_.Wait(*slot, &mu_, policy_.NextLook(*slot, should_take, now, holds_seen, queue_, pool_));
      continue;
    }
    std::unique_ptr<Batch> batch = TakeLocked(
        slot, now, [](const Batch&) { return true; }, unrun);
    if (batch == nullptr && unrun.empty()) {
      // Placed by cost, every batch this device could start finishes sooner
      // elsewhere (TakeLocked woke that device). It looks again when woken,
      // and now and then on its own: estimates change as they age.
      pool_.Wait(*slot, &mu_, now + kDeclinedRecheck);
      continue;
    }
    // More waits: let another device (or another worker of this one) take it
    // or arm its due time; wakes chain one by one.
    if (batch != nullptr && !queue_.empty()) pool_.WakeOne(/*busy_may_take=*/true);
    mu_.Unlock();

    ReportDepth();
    CompleteUnrun(unrun);
    if (batch != nullptr) RunAndFinish(slot, std::move(batch), /*busy=*/false);
    mu_.Lock();
  }
  ++slot->exited;
  mu_.Unlock();
}

std::unique_ptr<Batch> Scheduler::Impl::TakeLocked(Slot* slot, absl::Time now,
                                                   absl::FunctionRef<bool(const Batch&)> accept,
                                                   std::vector<UnrunJob>& unrun) {
  std::unique_ptr<Batch> batch = policy_.Take(*slot, now, accept, queue_, pool_);
  if (batch == nullptr) return nullptr;
  RemoveDeadJobs(*batch, now, unrun);
  for (const auto& job : batch->jobs) {
    job->cancellation_listener.store(nullptr, std::memory_order_relaxed);
  }
  NoteDepthLocked();
  if (batch->jobs.empty()) return nullptr;
  pool_.Claim(*slot, EstimatedEnd(*slot, batch->key.kind(), BatchWorkUnits(*batch), now));
  return batch;
}

void Scheduler::Impl::RunOnCaller(Slot* slot, std::unique_ptr<Batch> batch, bool busy) {
  auto cheap = CheapOn(*slot->device);
  std::vector<UnrunJob> unrun;
  for (int batches = 1; batch != nullptr; ++batches) {
    const bool ran = RunAndFinish(slot, std::move(batch), busy);
    {
      absl::MutexLock lock(&mu_);
      const absl::Time now = clock_->Now();
      if (ran && batches < kMaxBatchesOnCaller && !pool_.stopping() && !queue_.empty() &&
          pool_.ShouldTake(*slot)) {
        batch = TakeLocked(slot, now, cheap, unrun);
      }
      busy = policy_.under_load();
      if (batch == nullptr) policy_.CallerLoopEnds();
      if (policy_.WakeAfterCallerBatch(*slot, batch != nullptr, now, queue_, pool_)) {
        pool_.WakeOne(/*busy_may_take=*/true);
      }
    }
    ReportDepth();
    CompleteUnrun(unrun);
  }
}

bool Scheduler::Impl::RunAndFinish(Slot* slot, std::unique_ptr<Batch> batch, bool busy) {
  std::vector<Answer> answers;
  absl::Status failure;
  // What the device's cost model learns from (before the jobs' operations
  // are handed to their answers). Every placement learns, so that the
  // estimates are there to see (metrics) whether or not they place batches.
  const double units = BatchWorkUnits(*batch);
  const OperatorKind kind = batch->key.kind();
  absl::Duration took;
  {
    const BusyCoresScope cores(busy);
    if (options_.injected_batch_delay > absl::ZeroDuration()) {
      absl::SleepFor(options_.injected_batch_delay);
    }
    // Answers wait until the device is given back (FinishBatchLocked):
    // sending a batch's responses takes longer than computing it, and
    // meanwhile the device can run the next batch on another thread.
    const absl::Time start = clock_->Now();
    failure = ExecuteBatch(*slot->device, *batch, observer_, answers);
    took = clock_->Now() - start;
  }
  std::vector<UnrunJob> unrun;
  bool removed_now;
  int devices_left;
  {
    absl::MutexLock lock(&mu_);
    if (failure.ok()) slot->cost.Observe(kind, units, took, clock_->Now());
    removed_now = FinishBatchLocked(slot, std::move(batch), failure, unrun);
    devices_left = pool_.healthy();
  }
  if (removed_now && observer_ != nullptr) {
    observer_->OnDeviceRemoved(slot->device->description().name, devices_left);
  }
  if (!failure.ok()) ReportDepth();
  CompleteUnrun(unrun);
  // The device is free while this thread sends the answers: a batch that
  // forms meanwhile runs on another thread (a worker, or the submitting
  // thread whose arrival completes it).
  if (failure.ok()) DeliverAnswers(answers);
  return failure.ok();
}

void Scheduler::Impl::DeliverAnswers(std::vector<Answer>& answers) {
  Deliver(answers);
  absl::MutexLock lock(&mu_);
  DMLSERVE_DCHECK(delivering_ > 0);
  --delivering_;
  if (pool_.stopping() && delivering_ == 0) pool_.WakeAll();
}

bool Scheduler::Impl::FinishBatchLocked(Slot* slot, std::unique_ptr<Batch> batch,
                                        const absl::Status& failure, std::vector<UnrunJob>& unrun) {
  pool_.Release(*slot);
  if (pool_.stopping() && pool_.inflight_batches() == 0) pool_.WakeAll();
  if (failure.ok()) {
    ++delivering_;  // its answers are on their way (DeliverAnswers)
    return false;
  }
  const bool removed_now = pool_.MarkFailed(*slot, failure);
  if (pool_.healthy() > 0) {
    // Jobs whose batch failed on max_attempts devices fail themselves: a
    // batch that breaks devices must not break them all. Fallback devices
    // (the CPU behind GPUs) are the exception: once every primary is gone
    // they take the batch whatever it cost, as they exist so that a lost GPU
    // never strands a request.
    const bool last_resort = pool_.FallbacksServe(batch->key.kind());
    for (auto& job : batch->RemoveIf([this, last_resort](const Job& job) {
           return !last_resort && job.failed_attempts + 1 >= options_.max_attempts;
         })) {
      unrun.push_back(
          {std::move(job), absl::UnavailableError(absl::StrCat(
                               "its batch failed on ", options_.max_attempts,
                               " devices (--max_batch_attempts), the last: ", failure.message()))});
    }
    for (const auto& job : batch->jobs) {
      ++job->failed_attempts;
      job->cancellation_listener.store(this, std::memory_order_release);
    }
    if (!batch->jobs.empty()) queue_.Requeue(std::move(batch));
    if (!pool_.uniform()) FailUnservableLocked(unrun);
  } else {
    // Nothing can run these any more; fail them rather than leave them hanging.
    const absl::Status status =
        absl::UnavailableError(absl::StrCat("no healthy device left: ", pool_.last_failure()));
    for (auto& job : batch->jobs) unrun.push_back({std::move(job), status});
    for (auto& job : queue_.RemoveAll()) unrun.push_back({std::move(job), status});
  }
  NoteDepthLocked();
  // Healthy devices take the requeued batch; this device's other workers
  // exit.
  pool_.WakeAll();
  return removed_now;
}

void Scheduler::Impl::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    {
      absl::MutexLock lock(&mu_);
      queue_.CloseAll();
      pool_.Stop();
    }
    for (std::thread& thread : threads_) thread.join();
  });
}

void Scheduler::Impl::EvictTensor(absl::string_view registered_id) {
  // No lock: the pool's devices are fixed at construction. It is called when
  // the last copy of a registered tensor goes, which may be a job's, dropped
  // wherever that job ends (even under mu_).
  for (size_t i = 0; i < pool_.size(); ++i) pool_.at(i).device->Evict(registered_id);
}

std::vector<DeviceStatus> Scheduler::Impl::devices() const {
  std::vector<DeviceStatus> statuses;
  std::vector<const Device*> devices;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < pool_.size(); ++i) {
      const Slot& slot = pool_.at(i);
      DeviceStatus status;
      status.description = slot.device->description();
      status.healthy = slot.healthy;
      status.fallback = slot.fallback;
      for (int kind = 0; kind < kOperatorKindCount; ++kind) {
        status.costs[kind] = slot.cost.LineAt(static_cast<OperatorKind>(kind), clock_->Now());
      }
      statuses.push_back(std::move(status));
      devices.push_back(slot.device.get());
    }
  }
  // Outside the lock: a device may take its own locks to count memory.
  for (size_t i = 0; i < devices.size(); ++i) {
    statuses[i].memory_bytes = devices[i]->memory_bytes();
    statuses[i].resident_bytes = devices[i]->resident_bytes();
  }
  return statuses;
}

Scheduler::Scheduler(const SchedulerOptions& options, std::vector<std::unique_ptr<Device>> devices,
                     SchedulerObserver* observer,
                     std::vector<std::unique_ptr<Device>> fallback_devices)
    : impl_(std::make_unique<Impl>(options, std::move(devices), observer,
                                   std::move(fallback_devices))) {}

Scheduler::~Scheduler() { impl_->Shutdown(); }

absl::Status Scheduler::Submit(std::shared_ptr<Job> job) { return impl_->Submit(std::move(job)); }

void Scheduler::Shutdown() { impl_->Shutdown(); }

void Scheduler::EvictTensor(absl::string_view registered_id) { impl_->EvictTensor(registered_id); }

uint64_t Scheduler::WorkingBytes(const Operation& operation) const {
  return impl_->WorkingBytes(operation);
}

std::vector<DeviceStatus> Scheduler::devices() const { return impl_->devices(); }

const SchedulerOptions& Scheduler::options() const { return impl_->options(); }

}  // namespace dmlserve
