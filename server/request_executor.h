#ifndef DMLSERVE_SERVER_REQUEST_EXECUTOR_H_
#define DMLSERVE_SERVER_REQUEST_EXECUTOR_H_

// One Execute request's path through the server, shared by the unary and the
// streaming RPC: decode, submit to the scheduler, encode the result, and
// record the request metrics.

#include <cstdint>
#include <memory>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dmlserve/v1/dmlserve.pb.h"
#include "scheduler/job.h"
#include "scheduler/scheduler.h"
#include "server/memory_budget.h"
#include "server/service_metrics.h"
#include "server/tensor_registry.h"

namespace dmlserve {

class RequestExecutor {
 public:
  // Called exactly once per request, from any thread, possibly before
  // Execute() returns; must not block. `response` carries the request_id, and
  // on success the output and execution info; it lives until the callback
  // returns, and the callback may move from it. The caller keeps `held` until
  // the response has been handed to the client, so the memory budget covers
  // responses waiting to be sent too.
  using ResponseCallback = absl::AnyInvocable<void(
      absl::Status status, v1::ExecuteResponse* response, MemoryBudget::Reservation held)>;

  // All must outlive the executor. `metrics` and `budget` may be null.
  RequestExecutor(Scheduler* scheduler, const TensorRegistry* tensors, ServiceMetrics* metrics,
                  uint64_t max_tensor_bytes, MemoryBudget* budget);

  // Runs `request`, whose payloads and request_id are moved out. `deadline` comes from the
  // client. `on_admit` receives the job before it is submitted, so the caller
  // can cancel it later (it is not called when decoding fails).
  void Execute(v1::ExecuteRequest* request, absl::Time deadline,
               absl::FunctionRef<void(std::shared_ptr<Job>)> on_admit, ResponseCallback done);

  // Counts a request of `bytes` that was not a valid message (`status`) in
  // the request metrics, under no operator; the caller answers it.
  void RecordUnparsable(uint64_t bytes, const absl::Status& status);

 private:
  Scheduler* scheduler_;
  const TensorRegistry* tensors_;
  ServiceMetrics* metrics_;
  uint64_t max_tensor_bytes_;
  MemoryBudget* budget_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_REQUEST_EXECUTOR_H_
