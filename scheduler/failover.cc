#include "scheduler/failover.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace dmlserve {
namespace {

// In a mixed pool: fails the waiting jobs of every operator no serving
// device runs any more.
void FailUnservable(const DevicePool& pool, BatchQueue& queue, std::vector<UnrunJob>& unrun) {
  for (int i = 0; i < kOperatorKindCount; ++i) {
    const auto kind = static_cast<OperatorKind>(i);
    if (!pool.AnySupports(kind) || pool.CanServe(kind)) continue;
    const absl::Status status = absl::UnavailableError(absl::StrCat(
        "no healthy device left that runs ", OperatorName(kind), ": ", pool.last_failure()));
    for (auto& job : queue.RemoveAll(kind)) unrun.push_back({std::move(job), status});
  }
}

}  // namespace

void FailOver(std::unique_ptr<Batch> batch, const absl::Status& failure, int max_attempts,
              JobCancellationListener* listener, const DevicePool& pool, BatchQueue& queue,
              std::vector<UnrunJob>& unrun) {
  if (pool.healthy() == 0) {
    const absl::Status status =
        absl::UnavailableError(absl::StrCat("no healthy device left: ", pool.last_failure()));
    for (auto& job : batch->jobs) unrun.push_back({std::move(job), status});
    for (auto& job : queue.RemoveAll()) unrun.push_back({std::move(job), status});
    return;
  }
  const bool last_resort = pool.FallbacksServe(batch->key.kind());
  for (auto& job : batch->RemoveIf([last_resort, max_attempts](const Job& job) {
         return !last_resort && job.failed_attempts + 1 >= max_attempts;
       })) {
    unrun.push_back(
        {std::move(job), absl::UnavailableError(absl::StrCat(
                             "its batch failed on ", max_attempts,
                             " devices (--max_batch_attempts), the last: ", failure.message()))});
  }
  for (const auto& job : batch->jobs) {
    ++job->failed_attempts;
    job->cancellation_listener.store(listener, std::memory_order_release);
  }
  if (!batch->jobs.empty()) queue.Requeue(std::move(batch));
  if (!pool.uniform()) FailUnservable(pool, queue, unrun);
}

}  // namespace dmlserve
