#ifndef DMLSERVE_SCHEDULER_BATCH_H_
#define DMLSERVE_SCHEDULER_BATCH_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "scheduler/compatibility_key.h"
#include "scheduler/job.h"

namespace dmlserve {

// Jobs sharing one compatibility key, to be run as one Device::Execute call.
struct Batch {
  explicit Batch(CompatibilityKey key) : key(std::move(key)) {}

  CompatibilityKey key;
  std::vector<std::shared_ptr<Job>> jobs;
  std::vector<uint64_t> job_bytes;  // OperationBytes of each job
  uint64_t bytes = 0;
  // The enqueue time of the oldest job: the batch's age, which orders batches
  // and starts its queue-delay clock.
  absl::Time oldest_enqueue = absl::InfiniteFuture();
  uint64_t sequence = 0;  // creation order, breaks ties between equal ages
  // Put back after its device failed: runs before anything else.
  bool requeued = false;

  void Add(std::shared_ptr<Job> job, uint64_t job_bytes);
  // Drops the jobs `remove` selects, fixing up bytes and age; returns them.
  template <typename Predicate>
  std::vector<std::shared_ptr<Job>> RemoveIf(Predicate remove);
};

inline void Batch::Add(std::shared_ptr<Job> job, uint64_t bytes_of_job) {
  oldest_enqueue = std::min(oldest_enqueue, job->enqueue_time);
  bytes += bytes_of_job;
  job_bytes.push_back(bytes_of_job);
  jobs.push_back(std::move(job));
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
