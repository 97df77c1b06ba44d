#include "scheduler/batch_execution.h"

#include <string>
#include <utility>

#include "absl/types/span.h"
#include "kernels/core/check.h"
#include "kernels/core/operation.h"
#include "scheduler/cost_model.h"

namespace dmlserve {

void CompleteUnrun(std::vector<UnrunJob>& jobs) {
  for (UnrunJob& unrun : jobs) {
    JobResult result;
    result.status = std::move(unrun.status);
    auto done = std::move(unrun.job->done);
    if (done) done(std::move(result));
  }
  jobs.clear();
}

void Deliver(Answers& answers) {
  for (Answer& answer : answers) {
    if (answer.done) answer.done(std::move(answer.result));
  }
  answers.clear();
}

void RemoveDeadJobs(Batch& batch, absl::Time now, std::vector<UnrunJob>& unrun) {
  for (auto& job : batch.RemoveIf(
           [now](const Job& job) { return job.is_cancelled() || job.deadline <= now; })) {
    absl::Status status = job->is_cancelled()
                              ? absl::CancelledError("cancelled before it started")
                              : absl::DeadlineExceededError("deadline passed while queued");
    unrun.push_back({std::move(job), std::move(status)});
  }
}

absl::Status ExecuteBatch(Device& device, Batch& batch, const Clock& clock,
                          SchedulerObserver* observer, Answers& answers, BatchTiming& timing) {
  // Checked again right before the device starts: a job cancelled or expired
  // since its batch formed is still not computed.
  const absl::Time start = clock.Now();
  timing.start = start;
  timing.end = start;
  std::vector<UnrunJob> dead;
  RemoveDeadJobs(batch, start, dead);
  CompleteUnrun(dead);
  if (batch.jobs.empty()) return absl::OkStatus();

  const std::string& device_name = device.description().name;
  const OperatorKind kind = batch.key.kind();
  DMLSERVE_DCHECK(device.Supports(kind));
  DMLSERVE_DCHECK(batch.jobs.size() == batch.job_bytes.size());
  const int size = static_cast<int>(batch.jobs.size());
  timing.units = BatchWorkUnits(batch);
  absl::InlinedVector<WorkItem, 1> items(batch.jobs.size());
  for (size_t i = 0; i < batch.jobs.size(); ++i) {
    Job& job = *batch.jobs[i];
    items[i].operation = &job.operation;
    items[i].stop = &job;
    if (observer != nullptr && !job.started) {
      observer->OnJobStarted(kind, start - job.enqueue_time);
    }
    job.started = true;
  }
  absl::Status status = device.Execute(absl::MakeSpan(items));
  timing.executed = true;
  timing.end = clock.Now();
  const absl::Duration compute = timing.end - start;
  if (observer != nullptr) observer->OnBatchExecuted(kind, device_name, size, compute);
  if (!status.ok()) return status;

  for (size_t i = 0; i < batch.jobs.size(); ++i) {
    Job& job = *batch.jobs[i];
    job.operation = Operation();
    JobResult result;
    result.status = std::move(items[i].status);
    if (result.status.ok()) result.output = std::move(items[i].output);
    result.info.device = device_name;
    result.info.batch_size = static_cast<uint32_t>(size);
    result.info.queue_duration = start - job.enqueue_time;
    result.info.compute_duration = compute;
    answers.push_back({std::move(job.done), std::move(result)});
  }
  return absl::OkStatus();
}

}  // namespace dmlserve
