#ifndef DMLSERVE_SERVER_OPERATOR_SERVICE_H_
#define DMLSERVE_SERVER_OPERATOR_SERVICE_H_

// dmlserve.v1.OperatorService on gRPC's callback API: handlers never block a
// gRPC thread; Execute's reactor finishes from the scheduler's completion.

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <string>

#include "dmlserve/v1/dmlserve.grpc.pb.h"
#include "scheduler/scheduler.h"
#include "server/backend_devices.h"
#include "server/drain_gate.h"
#include "server/memory_budget.h"
#include "server/request_executor.h"
#include "server/service_metrics.h"
#include "server/tensor_registry.h"

namespace dmlserve {

struct OperatorServiceOptions {
  std::string version;
  uint64_t max_request_bytes = 64ull << 20;
  std::vector<AdapterReport> adapters;  // found at start-up
};

// Every method takes and gives raw bytes (see wire_messages.h): bytes that do
// not parse are INVALID_ARGUMENT, counted in the request metrics for Execute.
using RawOperatorService = v1::OperatorService::WithRawCallbackMethod_Execute<
    v1::OperatorService::WithRawCallbackMethod_ExecuteStream<
        v1::OperatorService::WithRawCallbackMethod_RegisterTensor<
            v1::OperatorService::WithRawCallbackMethod_ReleaseTensor<
                v1::OperatorService::WithRawCallbackMethod_GetServerInfo<
                    v1::OperatorService::Service>>>>>;

class OperatorService final : public RawOperatorService {
 public:
  // All must outlive the service; `metrics` and `budget` may be null. Calls
  // arriving once `gate` drains are answered UNAVAILABLE; Execute calls that
  // would take `budget` over its limit RESOURCE_EXHAUSTED.
  OperatorService(Scheduler* scheduler, TensorRegistry* tensors, ServiceMetrics* metrics,
                  DrainGate* gate, MemoryBudget* budget, OperatorServiceOptions options);

  grpc::ServerUnaryReactor* Execute(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ExecuteStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* RegisterTensor(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ReleaseTensor(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;

  // The request path of Execute and ExecuteStream, for other protocols'
  // services to share (kserve_service.h): one set of limits and metrics.
  RequestExecutor* executor() { return &executor_; }

 private:
  Scheduler* scheduler_;
  TensorRegistry* tensors_;
  DrainGate* gate_;
  OperatorServiceOptions options_;
  RequestExecutor executor_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_OPERATOR_SERVICE_H_
