#ifndef DMLSERVE_SCHEDULER_BATCH_EXECUTION_H_
#define DMLSERVE_SCHEDULER_BATCH_EXECUTION_H_

// One batch on one device, and how its jobs end: the part of the scheduler
// that calls Device::Execute. The scheduler decides where and when a batch
// runs and holds its lock around the bookkeeping; everything here runs
// outside that lock and touches no scheduler state.
//
// A job ends one of two ways:
//  - unrun (UnrunJob): cancelled, past its deadline, or failed with its
//    device; its callback gets only a status;
//  - answered (Answer): the device computed it (its item may still carry a
//    per-item error). Answers are collected while the batch runs and
//    delivered by the caller once it has given the device back, so that the
//    next batch can start while responses go out.

#include <memory>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kernels/backend/device.h"
#include "scheduler/batch.h"
#include "scheduler/clock.h"
#include "scheduler/job.h"
#include "scheduler/scheduler_observer.h"

namespace dmlserve {

// A job that ends without running, with the status to report.
struct UnrunJob {
  std::shared_ptr<Job> job;
  absl::Status status;
};

// A computed job's result and the callback to hand it to.
struct Answer {
  absl::AnyInvocable<void(JobResult)> done;
  JobResult result;
};

// A batch's answers, inline for a lone job.
using Answers = absl::InlinedVector<Answer, 1>;

// Calls each job's callback with its status; clears `jobs`.
void CompleteUnrun(std::vector<UnrunJob>& jobs);

// Calls each answer's callback with its result; clears `answers`.
void Deliver(Answers& answers);

// Moves the jobs of `batch` that are cancelled or past their deadline at
// `now` into `unrun`, with the status each reports (CANCELLED or
// DEADLINE_EXCEEDED).
void RemoveDeadJobs(Batch& batch, absl::Time now, std::vector<UnrunJob>& unrun);

// What ExecuteBatch read from its clock around Device::Execute: what the
// device's cost model learns from (DevicePool::Measured).
struct BatchTiming {
  bool executed = false;  // false: every job had died, the device did nothing
  double units = 0;       // BatchWorkUnits of the jobs it ran
  absl::Time start;       // before Execute: also when dead jobs were judged
  absl::Time end;         // after Execute returned
};

// Runs `batch` on `device` (which must support its operator): first ends
// the jobs that died since the batch formed (they are not computed), then
// calls Execute once for the rest, reporting each job's wait (once per job,
// also when a batch runs again after a device failure) and the batch's
// compute time to `observer` (which may be null). Times are `clock`'s, the
// clock the jobs' enqueue times were read from. On success appends one
// Answer per job, with the ExecutionInfo filled in, and releases each job's
// operation first (an output computed in place in an input's storage is
// then that storage's only holder, and the response takes it uncopied). A
// non-OK return is the device's own failure: no job was answered, and the
// jobs stay in `batch` to run elsewhere. An empty batch (every job died) is
// OK with no answers. `timing` says what ran and when, in either case.
absl::Status ExecuteBatch(Device& device, Batch& batch, const Clock& clock,
                          SchedulerObserver* observer, Answers& answers, BatchTiming& timing);

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_BATCH_EXECUTION_H_
