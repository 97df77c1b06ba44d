#include "scheduler/scheduler.h"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/backend/execution_hints.h"
#include "kernels/core/check.h"
#include "kernels/core/operation.h"
#include "kernels/core/thread_signal_stack.h"
#include "scheduler/calibration.h"
#include "scheduler/failover.h"

#if defined(__linux__)
#include <pthread.h>
#endif

namespace dmlserve {
namespace {

// How many batches a submitting thread runs in a row (its own job, then
// batches that queued meanwhile) before it leaves the rest to the device's
// workers and returns to gRPC, whose connections it also serves.
constexpr int kMaxBatchesOnCaller = 4;

// Placed by cost, how often a worker that left every waiting batch to a
// device that finishes it sooner looks at the queue again unwoken.
constexpr absl::Duration kDeclinedRecheck = absl::Milliseconds(50);

// Accepts a batch whose every job may run on a submitting thread.
auto CheapOn(const Device& device) {
  return [&device](const Batch& candidate) {
    for (const auto& job : candidate.jobs) {
      if (!device.MayRunOnCallerThread(job->operation)) return false;
    }
    return true;
  };
}

// Names a worker thread after its device ("cpu:0 worker"), so that top -H,
// gdb and /proc/PID/task show which device's workers spend the time. Linux
// keeps 15 bytes of a name.
void NameWorkerThread(const Device& device) {
#if defined(__linux__)
  const std::string name = absl::StrCat(device.description().name, " worker").substr(0, 15);
  pthread_setname_np(pthread_self(), name.c_str());
#else
  (void)device;
#endif
}

}  // namespace

Scheduler::Scheduler(const SchedulerOptions& options, std::vector<std::unique_ptr<Device>> devices,
                     SchedulerObserver* observer,
                     std::vector<std::unique_ptr<Device>> fallback_devices)
    : options_(options),
      observer_(observer),
      clock_(options.clock != nullptr ? options.clock : Clock::Real()),
      queue_(options.batch),
      pool_(std::move(devices), std::move(fallback_devices), options.placement),
      policy_(
          {options.hold_backstop,
           /*arrivals_take_idle_devices=*/options.injected_batch_delay <= absl::ZeroDuration()}) {
  std::vector<Slot*> workers;
  {
    absl::MutexLock lock(&mu_);
    CalibratePool(pool_);
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

absl::Status Scheduler::Submit(std::shared_ptr<Job> job) {
  if (job == nullptr || !job->done) {
    return absl::InvalidArgumentError("a job needs a completion callback");
  }
  // A cheap batch may run on this (gRPC's) thread.
  EnsureThreadSignalStack();
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
    pool_.Claim(*arrival.idle, kind, JobWorkUnits(job->operation) + SharedWorkUnits(job->operation),
                now);
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
      if (!queue_.empty()) policy_.WakeForQueue(now, queue_, pool_);
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

void Scheduler::OnJobCancelled(Job& job) {
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

void Scheduler::ReportDepth() {
  if (observer_ == nullptr) return;
  // Reading the depth under report_mu_ makes the last report carry the latest
  // value even when reports from different threads race.
  absl::MutexLock lock(&report_mu_);
  observer_->OnQueueDepth(depth_.load(std::memory_order_relaxed));
}

void Scheduler::WorkerLoop(Slot* slot) {
  EnsureThreadSignalStack();
  NameWorkerThread(*slot->device);
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
    if (batch != nullptr && !queue_.empty()) {
      policy_.WakeForQueue(now, queue_, pool_);
    }
    mu_.Unlock();

    ReportDepth();
    CompleteUnrun(unrun);
    if (batch != nullptr) RunAndFinish(slot, std::move(batch), /*busy=*/false);
    mu_.Lock();
  }
  pool_.WorkerExited(*slot);
  mu_.Unlock();
}

std::unique_ptr<Batch> Scheduler::TakeLocked(Slot* slot, absl::Time now,
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
  pool_.Claim(*slot, batch->key.kind(), BatchWorkUnits(*batch), now);
  return batch;
}

void Scheduler::RunOnCaller(Slot* slot, std::unique_ptr<Batch> batch, bool busy) {
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
        policy_.WakeForQueue(now, queue_, pool_);
      }
    }
    ReportDepth();
    CompleteUnrun(unrun);
  }
}

bool Scheduler::RunAndFinish(Slot* slot, std::unique_ptr<Batch> batch, bool busy) {
  Answers answers;
  absl::Status failure;
  BatchTiming timing;
  {
    const BusyCoresScope cores(busy);
    if (options_.injected_batch_delay > absl::ZeroDuration()) {
      absl::SleepFor(options_.injected_batch_delay);
    }
    // Answers wait until the device is given back (FinishBatchLocked):
    // sending a batch's responses takes longer than computing it, and
    // meanwhile the device can run the next batch on another thread.
    failure = ExecuteBatch(*slot->device, *batch, *clock_, observer_, answers, timing);
  }
  // What the device's cost model learns from: a batch the device ran.
  DevicePool::Measured measured;
  measured.units = timing.units;
  measured.took = timing.end - timing.start;
  measured.ended = timing.end;
  const DevicePool::Measured* learned = failure.ok() && timing.executed ? &measured : nullptr;
  std::vector<UnrunJob> unrun;
  bool removed_now;
  int devices_left;
  {
    absl::MutexLock lock(&mu_);
    removed_now = FinishBatchLocked(slot, std::move(batch), failure, learned, unrun);
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

void Scheduler::DeliverAnswers(Answers& answers) {
  Deliver(answers);
  absl::MutexLock lock(&mu_);
  DMLSERVE_DCHECK(delivering_ > 0);
  --delivering_;
  if (pool_.stopping() && delivering_ == 0) pool_.WakeAll();
}

bool Scheduler::FinishBatchLocked(Slot* slot, std::unique_ptr<Batch> batch,
                                  const absl::Status& failure, const DevicePool::Measured* measured,
                                  std::vector<UnrunJob>& unrun) {
  pool_.Release(*slot, batch->key.kind(), measured);
  if (pool_.stopping() && pool_.inflight_batches() == 0) pool_.WakeAll();
  if (failure.ok()) {
    ++delivering_;  // its answers are on their way (DeliverAnswers)
    return false;
  }
  const bool removed_now = pool_.MarkFailed(*slot, failure);
  FailOver(std::move(batch), failure, options_.max_attempts, this, pool_, queue_, unrun);
  NoteDepthLocked();
  // Healthy devices take the requeued batch; this device's other workers
  // exit.
  pool_.WakeAll();
  return removed_now;
}

void Scheduler::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    {
      absl::MutexLock lock(&mu_);
      queue_.CloseAll();
      pool_.Stop();
    }
    for (std::thread& thread : threads_) thread.join();
  });
}

void Scheduler::EvictTensor(absl::string_view registered_id) {
  // No lock: the pool's devices are fixed at construction. It is called when
  // the last copy of a registered tensor goes, which may be a job's, dropped
  // wherever that job ends (even under mu_).
  pool_.Evict(registered_id);
}

std::vector<DeviceStatus> Scheduler::devices() const {
  std::vector<DeviceStatus> statuses;
  {
    absl::MutexLock lock(&mu_);
    statuses = pool_.Statuses(clock_->Now());
  }
  // Outside the lock (fixed devices): a device may take its own locks.
  for (size_t i = 0; i < statuses.size(); ++i) {
    const Device& device = *pool_.at(i).device;
    statuses[i].memory_bytes = device.memory_bytes();
    statuses[i].resident_bytes = device.resident_bytes();
  }
  return statuses;
}

Scheduler::~Scheduler() { Shutdown(); }

uint64_t Scheduler::WorkingBytes(const Operation& operation) const {
  // No lock: the pool's devices are fixed at construction.
  return pool_.MostWorkingBytes(operation);
}

void Scheduler::NoteDepthLocked() {
  depth_.store(static_cast<int>(queue_.job_count()), std::memory_order_relaxed);
}

}  // namespace dmlserve
