#ifndef DMLSERVE_SCHEDULER_BATCH_QUEUE_H_
#define DMLSERVE_SCHEDULER_BATCH_QUEUE_H_

// The batching policy: the scheduler's waiting jobs, grouped into batches.
//
// An *open* batch (at most one per compatibility key) still accepts jobs. It
// becomes *closed* the moment it reaches max_batch_size jobs or
// max_batch_bytes bytes (a job that would push it over the byte cap closes it
// and starts the next one; a single job above the cap runs alone). A batch's
// bytes count the operands its jobs share (a matrix multiply's B) once, so a
// large shared weight does not stop batching.
//
// Which batches a device may start depends on whether it is idle:
//  - an *idle* device (running no batch) takes the oldest batch at once, open
//    or not: a job never waits while a device that could run it does nothing.
//    Batches therefore form only from jobs that arrive while devices are
//    busy, and grow with the load on their own.
//  - a device already running a batch (and able to run another alongside,
//    Device::max_inflight_batches) takes only a closed batch or an open one
//    that is *due*: its oldest job waited max_queue_delay. The delay is thus
//    an upper bound on how long a job waits for company while a device has
//    room, never a toll in front of an idle device.
//
// One exception to "an idle device takes it at once": a *held* batch. Under
// sustained load (the scheduler decides when), a job whose device says it
// pays to run in company (Device::PreferredCompany: a row against a large
// shared B) and that finds the queue empty is added with that company: its
// batch waits, even for an idle device, until it has that many jobs or
// max_queue_delay passes. At most one batch is held at a time, and only one
// opened in an empty queue.
//
// Among the oldest few runnable batches a device prefers one whose registered
// tensors are resident on it (saves an upload); batches put back after a
// device failure run first.
//
// Every operation is O(1) in the number of keys and batches (O(jobs in the
// batch) to remove one job). Not thread-safe: the scheduler guards it with
// its mutex.

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "kernels/backend/device.h"
#include "scheduler/batch.h"
#include "scheduler/batch_limits.h"
#include "scheduler/compatibility_key.h"
#include "scheduler/job.h"

namespace dmlserve {

class BatchQueue {
 public:
  // How many of the oldest runnable batches a device looks at for one with its
  // resident tensors; small, so preference never starves an old batch.
  static constexpr int kResidencyWindow = 4;

  // Limits below their minimum (see BatchLimits) are raised to it.
  explicit BatchQueue(const BatchLimits& limits);

  // Adds a job whose enqueue_time is set, under `key` (its CompatibilityKey)
  // with `own_bytes` (OperationBytes less SharedOperandBytes), both computed
  // by the caller outside any lock (the key of an inline B hashes its bytes).
  // Sets job->waiting_in. When `company` > 1 and the queue is empty, the
  // batch the job opens is held until it has `company` jobs or
  // max_queue_delay passes.
  void Add(std::shared_ptr<Job> job, CompatibilityKey key, uint64_t own_bytes, int company = 0);

  // Whether a device could start a batch now; `idle`: it runs none. With
  // `only`, only batches of those operators count (for a device that serves
  // a subset of them; O(batches) rather than O(1)).
  bool HasRunnable(absl::Time now, bool idle, std::optional<OperatorSet> only = {}) const;

  // The first batches an idle device may start now, in the order they run
  // (requeued ones first, then the oldest; Take's residency preference
  // aside): at most kResidencyWindow, from the window Take looks at. Empty
  // when none (a held batch is not startable). Valid until the queue changes.
  using Upcoming = absl::InlinedVector<const Batch*, kResidencyWindow>;
  Upcoming UpcomingBatches(absl::Time now) const;

  // Removes and returns the batch `device` should run next among those
  // `accept` agrees to, or null. Clears waiting_in of its jobs.
  std::unique_ptr<Batch> Take(absl::Time now, bool idle, const Device& device,
                              absl::FunctionRef<bool(const Batch&)> accept);

  // Puts back a batch whose device failed, ahead of everything else.
  void Requeue(std::unique_ptr<Batch> batch);

  // Closes every open batch and every batch opened later (shutdown drains
  // without waiting).
  void CloseAll();

  // When the oldest open batch falls due or the held batch's hold ends
  // (InfiniteFuture when neither will): a device's worker waits until then.
  // With `only`, of the batches of those operators (O(batches)).
  absl::Time NextDueTime(std::optional<OperatorSet> only = {}) const;

  // Whether a batch is held now (waiting for company; not yet runnable by an
  // idle device).
  bool holding(absl::Time now) const { return held_ != nullptr && !HoldOver(*held_, now); }

  // When the held batch's hold runs out (InfiniteFuture when none is held).
  absl::Time hold_end() const {
    return held_ != nullptr ? held_->held_until : absl::InfiniteFuture();
  }

  // Removes a waiting job (cancelled); null when it is not waiting.
  std::shared_ptr<Job> Remove(Job* job);

  // Removes every waiting job.
  std::vector<std::shared_ptr<Job>> RemoveAll();
  // Removes every waiting job of operator `kind` (no device left runs it).
  std::vector<std::shared_ptr<Job>> RemoveAll(OperatorKind kind);

  size_t job_count() const { return job_count_; }
  bool empty() const { return job_count_ == 0; }

 private:
  using BatchList = std::list<std::unique_ptr<Batch>>;

  bool IsDue(const Batch& batch, absl::Time now) const;
  // Whether a held batch's hold is over: company found, or time is up.
  static bool HoldOver(const Batch& batch, absl::Time now) {
    return static_cast<int>(batch.jobs.size()) >= batch.company || batch.held_until <= now;
  }
  // The first few batches of each list that a device (`idle` or not) may
  // start and `accept` agrees to, into `out` (room for 2 * kResidencyWindow),
  // sorted in run order; returns how many.
  int Candidates(absl::Time now, bool idle, absl::FunctionRef<bool(const Batch&)> accept,
                 Batch** out) const;
  // Moves an open batch to the back of closed_.
  void Close(Batch* batch);
  // Unlinks a batch from its list (and open_by_key_) and returns it.
  std::unique_ptr<Batch> Unlink(Batch* batch);

  const BatchLimits limits_;
  bool close_all_ = false;
  uint64_t next_sequence_ = 0;
  size_t job_count_ = 0;
  BatchList open_;         // in creation order, which is age order
  BatchList closed_;       // requeued first, then in closing order
  Batch* held_ = nullptr;  // the open batch waiting for company, if any
  absl::flat_hash_map<CompatibilityKey, Batch*> open_by_key_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_BATCH_QUEUE_H_
