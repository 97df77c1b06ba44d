#ifndef DMLSERVE_SCHEDULER_BATCH_H_
#define DMLSERVE_SCHEDULER_BATCH_H_

#include <algorithm>
#include <cstdint>
#include <list>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/time/time.h"
#include "kernels/core/check.h"
#include "scheduler/compatibility_key.h"
#include "scheduler/job.h"

namespace dmlserve {

// Jobs sharing one compatibility key, to be run as one Device::Execute call.
struct Batch {
  explicit Batch(CompatibilityKey key) : key(std::move(key)) {}

  CompatibilityKey key;
  // Inline room for one job: a lone job (most batches at low load) costs no
  // allocation beyond its Batch.
  absl::InlinedVector<std::shared_ptr<Job>, 1> jobs;
  // Each job's own bytes: its operands and output, without those the batch
  // shares (SharedOperandBytes), which it holds once however many jobs it has.
  absl::InlinedVector<uint64_t, 1> job_bytes;
  uint64_t bytes = 0;  // the sum of job_bytes
  // The enqueue time of the oldest job: the batch's age, which orders batches
  // and starts its queue-delay clock.
  absl::Time oldest_enqueue = absl::InfiniteFuture();
  uint64_t sequence = 0;  // creation order, breaks ties between equal ages
  // When its first job arrived: its queue-delay clock (unlike oldest_enqueue,
  // it never moves when a job leaves, so open batches stay in due order).
  absl::Time created = absl::InfiniteFuture();
  // Put back after its device failed: runs before anything else.
  bool requeued = false;
  // A held batch (see BatchQueue) waits, even for an idle device, until it
  // has `company` jobs or `held_until` passes.
  int company = 0;
  absl::Time held_until = absl::InfinitePast();
  // Where BatchQueue keeps it: open (still accepting jobs) or closed, and its
  // place in that list.
  bool open = true;
  std::list<std::unique_ptr<Batch>>::iterator position;

  void Add(std::shared_ptr<Job> job, uint64_t own_bytes);
  // Removes `job`; returns it, or null when it is not in this batch.
  std::shared_ptr<Job> Remove(const Job* job);
  // Drops the jobs `remove` selects, fixing up bytes and age; returns them.
  template <typename Predicate>
  std::vector<std::shared_ptr<Job>> RemoveIf(Predicate remove);
};

inline void Batch::Add(std::shared_ptr<Job> job, uint64_t own_bytes) {
  DMLSERVE_DCHECK(jobs.size() == job_bytes.size());
  DMLSERVE_DCHECK(bytes + own_bytes >= bytes);  // the sum never wraps
  oldest_enqueue = std::min(oldest_enqueue, job->enqueue_time);
  bytes += own_bytes;
  job_bytes.push_back(own_bytes);
  jobs.push_back(std::move(job));
}

inline std::shared_ptr<Job> Batch::Remove(const Job* job) {
  std::vector<std::shared_ptr<Job>> removed =
      RemoveIf([job](const Job& candidate) { return &candidate == job; });
  return removed.empty() ? nullptr : std::move(removed.front());
}

template <typename Predicate>
std::vector<std::shared_ptr<Job>> Batch::RemoveIf(Predicate remove) {
  std::vector<std::shared_ptr<Job>> removed;
  size_t kept = 0;
  bytes = 0;
  oldest_enqueue = absl::InfiniteFuture();
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (remove(*jobs[i])) {
      removed.push_back(std::move(jobs[i]));
      continue;
    }
    bytes += job_bytes[i];
    oldest_enqueue = std::min(oldest_enqueue, jobs[i]->enqueue_time);
    jobs[kept] = std::move(jobs[i]);
    job_bytes[kept] = job_bytes[i];
    ++kept;
  }
  jobs.resize(kept);
  job_bytes.resize(kept);
  return removed;
}

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_BATCH_H_
