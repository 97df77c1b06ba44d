#ifndef DMLSERVE_SCHEDULER_FAILOVER_H_
#define DMLSERVE_SCHEDULER_FAILOVER_H_

// Where the jobs of a batch go when its device fails under it. The scheduler
// first takes the device out of rotation (DevicePool::MarkFailed), then hands
// the batch here, under its lock:
//  - while another device serves, the batch goes back to the head of the
//    queue and each job counts a failed attempt. A job whose batch has now
//    failed on `max_attempts` devices fails UNAVAILABLE instead: one batch
//    that breaks devices (a hang, a fence that never signals) must not break
//    them all. Fallback devices (the CPU behind GPUs) are the exception: once
//    every primary is gone they take the batch whatever it cost, as they
//    exist so that a lost GPU never strands a request;
//  - in a mixed pool (some device runs a subset of the operators), waiting
//    jobs of an operator no serving device runs any more fail: none would
//    ever take them;
//  - with no healthy device left, the batch's jobs and every waiting job fail
//    UNAVAILABLE rather than hang.

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/batch.h"
#include "scheduler/batch_execution.h"
#include "scheduler/batch_queue.h"
#include "scheduler/device_pool.h"
#include "scheduler/job.h"

namespace dmlserve {

// Requeues or ends the jobs of `batch`, which failed with `failure` (its
// device already marked failed in `pool`), as above. Jobs that end go to
// `unrun` with their status; requeued ones get `listener` back, so that a
// cancellation reaches the queue again.
void FailOver(std::unique_ptr<Batch> batch, const absl::Status& failure, int max_attempts,
              JobCancellationListener* listener, const DevicePool& pool, BatchQueue& queue,
              std::vector<UnrunJob>& unrun);

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_FAILOVER_H_
