#ifndef DMLSERVE_SCHEDULER_BATCH_QUEUE_H_
#define DMLSERVE_SCHEDULER_BATCH_QUEUE_H_

// The scheduler's waiting jobs, grouped into batches.
//
// An *open* batch (one per compatibility key) still accepts jobs. It becomes
// *closed* the moment it reaches max_batch_size jobs or max_batch_bytes bytes
// (a job that would push it over the byte cap closes it and starts the next
// one; a single job above the cap runs alone). An open batch whose oldest job
// has waited max_queue_delay is *due*: a free device may take it, but until
// one does it keeps accepting jobs, so a saturated server forms full batches
// instead of a stream of singletons. With max_queue_delay 0 every open batch is
// due at once: batches form only from jobs that arrive while every device is
// busy. This matches Triton's dynamic batcher, which waits for the delay (or
// the preferred/max size) before releasing a batch even when an instance is
// idle; we do not close early for an idle device, because the delay is the
// operator's chosen latency/throughput trade and the default is only 200 µs.
//
// Closed and due batches are *runnable*. A device takes the oldest runnable
// batch, except that among the first few it prefers one whose registered
// tensors are already resident on it (saves an upload). Batches put back after
// a device failure run first.
//
// Not thread-safe: the scheduler guards it with its mutex.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/time/time.h"
#include "kernels/backend/device.h"
#include "scheduler/batch.h"
#include "scheduler/compatibility_key.h"
#include "scheduler/job.h"

namespace dmlserve {

struct BatchLimits {
  int max_batch_size = 64;
  uint64_t max_batch_bytes = 64ull << 20;
  absl::Duration max_queue_delay = absl::Microseconds(200);
};

class BatchQueue {
 public:
  // How many of the oldest runnable batches a device looks at for one with its
  // resident tensors; small, so preference never starves an old batch.
  static constexpr int kResidencyWindow = 4;

  explicit BatchQueue(const BatchLimits& limits);

  // Adds a job whose enqueue_time is set.
  void Add(std::shared_ptr<Job> job);

  // Whether a device could take a batch now.
  bool HasRunnable(absl::Time now) const;

  // Removes and returns the batch a free `device` should run next, or null.
  std::unique_ptr<Batch> Take(absl::Time now, const Device& device);

  // Puts back a batch whose device failed, ahead of everything else.
  void Requeue(std::unique_ptr<Batch> batch);

  // Makes every open batch due now (shutdown drains without waiting).
  void CloseAll();

  // The earliest time after `now` at which an open batch becomes due;
  // InfiniteFuture when none will.
  absl::Time NextDueTime(absl::Time now) const;

  // Removes every waiting job `remove` selects (expired or cancelled ones).
  std::vector<std::shared_ptr<Job>> RemoveJobsIf(absl::FunctionRef<bool(const Job&)> remove);

  // Removes every waiting job.
  std::vector<std::shared_ptr<Job>> RemoveAll();

  // The earliest deadline among waiting jobs (InfiniteFuture when none).
  absl::Time EarliestDeadline() const;

  size_t job_count() const { return job_count_; }
  bool empty() const { return job_count_ == 0; }

 private:
  bool IsDue(const Batch& batch, absl::Time now) const;
  std::unique_ptr<Batch> NewBatch(const CompatibilityKey& key);
  void Close(std::unique_ptr<Batch> batch);

  const BatchLimits limits_;
  bool close_all_ = false;
  uint64_t next_sequence_ = 0;
  size_t job_count_ = 0;
  absl::flat_hash_map<CompatibilityKey, std::unique_ptr<Batch>> open_;
  std::deque<std::unique_ptr<Batch>> closed_;  // requeued first, then by closing order
};

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_BATCH_QUEUE_H_
