#include "server/request_executor.h"

#include <optional>
#include <string>
#include <utility>

#include "kernels/core/operation.h"
#include "server/request_decoder.h"
#include "server/response_encoder.h"

namespace dmlserve {

RequestExecutor::RequestExecutor(Scheduler* scheduler, const TensorRegistry* tensors,
                                 ServiceMetrics* metrics, uint64_t max_tensor_bytes,
                                 MemoryBudget* budget)
    : scheduler_(scheduler),
      tensors_(tensors),
      metrics_(metrics),
      max_tensor_bytes_(max_tensor_bytes),
      budget_(budget) {}

void RequestExecutor::Execute(v1::ExecuteRequest* request, absl::Time deadline,
                              absl::FunctionRef<void(std::shared_ptr<Job>)> on_admit,
                              ResponseCallback done) {
  const absl::Time start = absl::Now();
  const std::optional<OperatorKind> kind = RequestedOperator(*request);
  const uint64_t request_bytes = request->ByteSizeLong();
  if (metrics_ != nullptr) metrics_->RequestStarted(kind, request_bytes);

  // Shared by both outcomes; the metrics see every answer exactly once.
  auto finish = [metrics = metrics_, kind, start](
                    absl::Status status, v1::ExecuteResponse* response,
                    MemoryBudget::Reservation held, ResponseCallback& done) {
    if (metrics != nullptr) metrics->RequestFinished(kind, status.code(), absl::Now() - start);
    done(std::move(status), response, std::move(held));
  };
  // An answer that never reaches the scheduler.
  auto refuse = [&](absl::Status status) {
    v1::ExecuteResponse response;
    response.set_request_id(request->request_id());
    finish(std::move(status), &response, {}, done);
  };

  absl::StatusOr<Operation> operation = DecodeExecuteRequest(request, *tensors_, max_tensor_bytes_);
  if (!operation.ok()) {
    refuse(operation.status());
    return;
  }
  // The request's message (its payloads now live on in the job), the output
  // it will produce and the working memory the device may need for it,
  // until the response is on its way.
  MemoryBudget::Reservation held;
  if (budget_ != nullptr) {
    absl::StatusOr<MemoryBudget::Reservation> reserved = budget_->Reserve(
        request_bytes + OutputBytes(*operation) + scheduler_->WorkingBytes(*operation));
    if (!reserved.ok()) {
      refuse(reserved.status());
      return;
    }
    held = *std::move(reserved);
  }

  auto job = std::make_shared<Job>();
  job->operation = *std::move(operation);
  job->deadline = deadline;
  // The job owns everything the answer needs (the response is made when it
  // is given); a refused Submit does not call `done`, so the refusal is
  // reported through it below.
  job->done = [finish, done = std::move(done), held = std::move(held),
               request_id = std::move(*request->mutable_request_id())](JobResult result) mutable {
    v1::ExecuteResponse response;
    response.set_request_id(std::move(request_id));
    absl::Status status = std::move(result.status);
    if (status.ok()) EncodeJobOutput(std::move(result), &response);
    finish(std::move(status), &response, std::move(held), done);
  };
  on_admit(job);
  if (absl::Status status = scheduler_->Submit(job); !status.ok()) {
    JobResult refused;
    refused.status = std::move(status);
    auto job_done = std::move(job->done);
    job_done(std::move(refused));
  }
}

void RequestExecutor::RecordUnparsable(uint64_t bytes, const absl::Status& status) {
  if (metrics_ == nullptr) return;
  metrics_->RequestStarted(std::nullopt, bytes);
  metrics_->RequestFinished(std::nullopt, status.code(), absl::ZeroDuration());
}

}  // namespace dmlserve
