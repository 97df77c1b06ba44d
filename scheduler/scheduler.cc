#include "scheduler/scheduler.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "scheduler/batch.h"
#include "scheduler/batch_queue.h"

namespace dmlserve {
namespace {

// Job::Cancel() only sets a flag, so a cancelled job that is still waiting is
// found by polling. The poll runs only while jobs wait, at a rate far below
// anything that costs CPU; a job is also checked when its batch starts.
constexpr absl::Duration kCancellationPollInterval = absl::Milliseconds(10);

// A job finished without running, with the status to report.
struct Completion {
  std::shared_ptr<Job> job;
  absl::Status status;
};

void Complete(std::vector<Completion>& completions) {
  for (Completion& completion : completions) {
    JobResult result;
    result.status = std::move(completion.status);
    auto done = std::move(completion.job->done);
    if (done) done(std::move(result));
  }
  completions.clear();
}

absl::Status StatusForDeadJob(const Job& job) {
  if (job.is_cancelled()) return absl::CancelledError("cancelled before it started");
  return absl::DeadlineExceededError("deadline passed while queued");
}

}  // namespace

class Scheduler::Impl {
 public:
  Impl(const SchedulerOptions& options, std::vector<std::unique_ptr<Device>> devices,
       SchedulerObserver* observer, std::vector<std::unique_ptr<Device>> fallback_devices);
  ~Impl() { Shutdown(); }

  absl::Status Submit(std::shared_ptr<Job> job);
  void Shutdown();
  void EvictTensor(absl::string_view registered_id);
  std::vector<DeviceStatus> devices() const;
  const SchedulerOptions& options() const { return options_; }

 private:
  struct DeviceSlot {
    std::unique_ptr<Device> device;
    bool healthy = true;
    bool fallback = false;
    int workers = 1;   // max_inflight_batches()
    int inflight = 0;  // batches it is running
  };

  void WorkerLoop(DeviceSlot* slot);
  // Whether `slot` should take the next batch: no other device of its kind
  // (primary or fallback) with a free worker has fewer batches running. A
  // free worker is waiting or about to look at the queue, so the batch is
  // not stranded.
  // Devices pull work, so this turns "whoever wakes first" into placement on
  // the least-loaded device.
  bool IsLeastLoadedLocked(const DeviceSlot& slot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimerLoop();
  // Runs a batch outside the lock and completes its jobs. A non-OK result is
  // the device's own failure: then no job was completed.
  absl::Status Run(const DeviceSlot& slot, Batch& batch);
  // The device failed running `batch`: takes it out of rotation and requeues
  // the batch, or fails every job when no device is left. Returns whether this
  // call took the device out.
  bool HandleDeviceFailureLocked(DeviceSlot* slot, std::unique_ptr<Batch> batch,
                                 const absl::Status& failure, std::vector<Completion>& completions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes expired and cancelled jobs from the queue.
  void SweepLocked(absl::Time now, std::vector<Completion>& completions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When the timer must next look at the queue: an open batch falls due, a
  // deadline passes, or cancellations are due for a poll.
  absl::Time TimerWakeLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteDepthLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes a worker for runnable work. With fallback devices some waiting
  // workers may not take it, so all are woken rather than one that might
  // go straight back to sleep.
  void WakeWorkerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (has_fallback_) {
      work_cv_.SignalAll();
    } else {
      work_cv_.Signal();
    }
  }
  // Reports the latest depth; never under mu_, so an observer may call back.
  void ReportDepth();

  const SchedulerOptions options_;
  SchedulerObserver* const observer_;

  mutable absl::Mutex mu_;
  absl::CondVar work_cv_;   // a batch may be runnable, or workers should exit
  absl::CondVar timer_cv_;  // the timer's next wake time may have moved earlier
  BatchQueue queue_ ABSL_GUARDED_BY(mu_);
  std::vector<DeviceSlot> slots_ ABSL_GUARDED_BY(mu_);  // the vector itself never changes
  int healthy_devices_ ABSL_GUARDED_BY(mu_) = 0;
  int healthy_primary_devices_ ABSL_GUARDED_BY(mu_) = 0;
  bool has_fallback_ = false;  // set before any thread starts
  std::string last_failure_ ABSL_GUARDED_BY(mu_);
  int inflight_batches_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool timer_stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time timer_wake_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // A lower bound on the earliest deadline of a waiting job.
  absl::Time next_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::Time next_cancellation_poll_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();

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
      queue_(BatchLimits{std::max(1, options.max_batch_size),
                         std::max<uint64_t>(1, options.max_batch_bytes),
                         std::max(absl::ZeroDuration(), options.max_queue_delay)}) {
  std::vector<DeviceSlot*> workers;
  {
    absl::MutexLock lock(&mu_);
    const size_t primaries = devices.size();
    has_fallback_ = !fallback_devices.empty();
    for (auto& device : fallback_devices) devices.push_back(std::move(device));
    slots_.resize(devices.size());
    for (size_t i = 0; i < devices.size(); ++i) {
      slots_[i].device = std::move(devices[i]);
      slots_[i].fallback = i >= primaries;
      slots_[i].workers = std::max(1, slots_[i].device->max_inflight_batches());
      for (int j = 0; j < slots_[i].workers; ++j) {
        workers.push_back(&slots_[i]);
      }
    }
    healthy_devices_ = static_cast<int>(slots_.size());
    healthy_primary_devices_ = static_cast<int>(primaries);
    if (slots_.empty()) last_failure_ = "no devices configured";
  }
  for (DeviceSlot* slot : workers) {
    threads_.emplace_back([this, slot] { WorkerLoop(slot); });
  }
  threads_.emplace_back([this] { TimerLoop(); });
}

absl::Status Scheduler::Impl::Submit(std::shared_ptr<Job> job) {
  if (job == nullptr || !job->done) {
    return absl::InvalidArgumentError("a job needs a completion callback");
  }
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("the scheduler is shutting down");
    if (healthy_devices_ == 0) {
      return absl::UnavailableError(absl::StrCat("no healthy device left: ", last_failure_));
    }
    if (static_cast<int>(queue_.job_count()) >= options_.max_queue) {
      return absl::ResourceExhaustedError(
          absl::StrCat("queue full: ", queue_.job_count(), " jobs waiting (--max_queue)"));
    }
    const absl::Time now = absl::Now();
    job->enqueue_time = now;
    const absl::Time deadline = job->deadline;
    queue_.Add(std::move(job));
    NoteDepthLocked();
    if (queue_.HasRunnable(now)) WakeWorkerLocked();
    next_deadline_ = std::min(next_deadline_, deadline);
    if (TimerWakeLocked(now) < timer_wake_) timer_cv_.Signal();
  }
  ReportDepth();
  return absl::OkStatus();
}

void Scheduler::Impl::NoteDepthLocked() { depth_.store(static_cast<int>(queue_.job_count())); }

void Scheduler::Impl::ReportDepth() {
  if (observer_ == nullptr) return;
  // Reading the depth under report_mu_ makes the last report carry the latest
  // value even when reports from different threads race.
  absl::MutexLock lock(&report_mu_);
  observer_->OnQueueDepth(depth_.load());
}

void Scheduler::Impl::WorkerLoop(DeviceSlot* slot) {
  std::vector<Completion> completions;
  mu_.Lock();
  while (slot->healthy) {
    const absl::Time now = absl::Now();
    const bool may_run = !slot->fallback || healthy_primary_devices_ == 0;
    if (!may_run || !queue_.HasRunnable(now) || !IsLeastLoadedLocked(*slot)) {
      if (shutting_down_ && queue_.empty() && inflight_batches_ == 0) break;
      // Leaving runnable work to a less-loaded device: make sure its waiting
      // worker wakes, since the signal may have woken only this one.
      if (may_run && queue_.HasRunnable(now)) work_cv_.SignalAll();
      work_cv_.Wait(&mu_);
      continue;
    }
    std::unique_ptr<Batch> batch = queue_.Take(now, *slot->device);
    for (auto& job : batch->RemoveIf(
             [now](const Job& job) { return job.is_cancelled() || job.deadline <= now; })) {
      absl::Status status = StatusForDeadJob(*job);
      completions.push_back({std::move(job), std::move(status)});
    }
    NoteDepthLocked();
    if (batch->jobs.empty()) {
      batch.reset();
    } else {
      ++inflight_batches_;
      ++slot->inflight;
    }
    // Wake another idle worker if more is runnable (wakes chain one by one).
    if (queue_.HasRunnable(now)) WakeWorkerLocked();
    mu_.Unlock();

    ReportDepth();
    Complete(completions);
    if (batch != nullptr) {
      absl::Status failure = Run(*slot, *batch);
      bool removed_now = false;
      mu_.Lock();
      --inflight_batches_;
      --slot->inflight;
      if (!failure.ok()) {
        removed_now = HandleDeviceFailureLocked(slot, std::move(batch), failure, completions);
      }
      if (shutting_down_ && inflight_batches_ == 0) work_cv_.SignalAll();
      mu_.Unlock();
      if (removed_now && observer_ != nullptr) {
        observer_->OnDeviceRemoved(slot->device->description().name);
      }
      if (!failure.ok()) ReportDepth();
      Complete(completions);
      batch.reset();  // frees the jobs' tensors outside the lock
    }
    mu_.Lock();
  }
  mu_.Unlock();
}

bool Scheduler::Impl::IsLeastLoadedLocked(const DeviceSlot& slot) const {
  for (const DeviceSlot& other : slots_) {
    if (&other != &slot && other.healthy && other.fallback == slot.fallback &&
        other.inflight < other.workers && other.inflight < slot.inflight) {
      return false;
    }
  }
  return true;
}

absl::Status Scheduler::Impl::Run(const DeviceSlot& slot, Batch& batch) {
  const std::string& device_name = slot.device->description().name;
  const OperatorKind kind = batch.key.kind();
  const int size = static_cast<int>(batch.jobs.size());
  const absl::Time start = absl::Now();
  std::vector<WorkItem> items(batch.jobs.size());
  for (size_t i = 0; i < batch.jobs.size(); ++i) {
    items[i].operation = &batch.jobs[i]->operation;
    if (observer_ != nullptr) observer_->OnJobStarted(kind, start - batch.jobs[i]->enqueue_time);
  }
  absl::Status status = slot.device->Execute(absl::MakeSpan(items));
  const absl::Duration compute = absl::Now() - start;
  if (observer_ != nullptr) observer_->OnBatchExecuted(kind, device_name, size, compute);
  if (!status.ok()) return status;  // the jobs stay in the batch, to be run elsewhere

  for (size_t i = 0; i < batch.jobs.size(); ++i) {
    Job& job = *batch.jobs[i];
    JobResult result;
    result.status = std::move(items[i].status);
    if (result.status.ok()) result.output = std::move(items[i].output);
    result.info.device = device_name;
    result.info.batch_size = static_cast<uint32_t>(size);
    result.info.queue_duration = start - job.enqueue_time;
    result.info.compute_duration = compute;
    auto done = std::move(job.done);
    if (done) done(std::move(result));
  }
  return absl::OkStatus();
}

bool Scheduler::Impl::HandleDeviceFailureLocked(DeviceSlot* slot, std::unique_ptr<Batch> batch,
                                                const absl::Status& failure,
                                                std::vector<Completion>& completions) {
  bool removed_now = false;
  if (slot->healthy) {
    slot->healthy = false;
    --healthy_devices_;
    if (!slot->fallback) --healthy_primary_devices_;
    removed_now = true;
    last_failure_ = absl::StrCat(slot->device->description().name, " failed: ", failure.ToString());
  }
  if (healthy_devices_ > 0) {
    queue_.Requeue(std::move(batch));
  } else {
    // Nothing can run these any more; fail them rather than leave them hanging.
    const absl::Status status =
        absl::UnavailableError(absl::StrCat("no healthy device left: ", last_failure_));
    for (auto& job : batch->jobs) completions.push_back({std::move(job), status});
    for (auto& job : queue_.RemoveAll()) completions.push_back({std::move(job), status});
  }
  NoteDepthLocked();
  // Wake healthy workers for the requeued batch, and this device's other
  // workers so they exit.
  work_cv_.SignalAll();
  return removed_now;
}

void Scheduler::Impl::SweepLocked(absl::Time now, std::vector<Completion>& completions) {
  std::vector<std::shared_ptr<Job>> gone = queue_.RemoveJobsIf(
      [now](const Job& job) { return job.is_cancelled() || job.deadline <= now; });
  for (auto& job : gone) {
    absl::Status status = StatusForDeadJob(*job);
    completions.push_back({std::move(job), std::move(status)});
  }
  if (!gone.empty()) NoteDepthLocked();
  next_deadline_ = queue_.EarliestDeadline();
  next_cancellation_poll_ = now + kCancellationPollInterval;
}

absl::Time Scheduler::Impl::TimerWakeLocked(absl::Time now) const {
  absl::Time wake = std::min(queue_.NextDueTime(now), next_deadline_);
  if (!queue_.empty()) wake = std::min(wake, next_cancellation_poll_);
  return wake;
}

void Scheduler::Impl::TimerLoop() {
  std::vector<Completion> completions;
  mu_.Lock();
  while (!timer_stop_) {
    const absl::Time now = absl::Now();
    if (now >= next_deadline_ || (!queue_.empty() && now >= next_cancellation_poll_)) {
      SweepLocked(now, completions);
    }
    // An open batch may have become due: hand it to an idle worker.
    if (queue_.HasRunnable(now)) WakeWorkerLocked();
    if (!completions.empty()) {
      mu_.Unlock();
      ReportDepth();
      Complete(completions);
      mu_.Lock();
      continue;
    }
    const absl::Time wake = TimerWakeLocked(now);
    timer_wake_ = wake;
    timer_cv_.WaitWithDeadline(&mu_, wake);
    // Awake: whatever changed meanwhile is seen at the top of the loop.
    timer_wake_ = absl::InfinitePast();
  }
  mu_.Unlock();
}

void Scheduler::Impl::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    {
      absl::MutexLock lock(&mu_);
      shutting_down_ = true;
      queue_.CloseAll();
      work_cv_.SignalAll();
    }
    // The timer is the last thread; workers drain the queue first.
    for (size_t i = 0; i + 1 < threads_.size(); ++i) threads_[i].join();
    {
      absl::MutexLock lock(&mu_);
      timer_stop_ = true;
      timer_cv_.Signal();
    }
    threads_.back().join();
  });
}

void Scheduler::Impl::EvictTensor(absl::string_view registered_id) {
  std::vector<Device*> devices;
  {
    absl::MutexLock lock(&mu_);
    for (DeviceSlot& slot : slots_) devices.push_back(slot.device.get());
  }
  for (Device* device : devices) device->Evict(registered_id);
}

std::vector<DeviceStatus> Scheduler::Impl::devices() const {
  std::vector<DeviceStatus> statuses;
  std::vector<const Device*> devices;
  {
    absl::MutexLock lock(&mu_);
    for (const DeviceSlot& slot : slots_) {
      DeviceStatus status;
      status.description = slot.device->description();
      status.healthy = slot.healthy;
      status.fallback = slot.fallback;
      statuses.push_back(std::move(status));
      devices.push_back(slot.device.get());
    }
  }
  // Outside the lock: a device may take its own locks to count memory.
  for (size_t i = 0; i < devices.size(); ++i) statuses[i].memory_bytes = devices[i]->memory_bytes();
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

std::vector<DeviceStatus> Scheduler::devices() const { return impl_->devices(); }

const SchedulerOptions& Scheduler::options() const { return impl_->options(); }

}  // namespace dmlserve
