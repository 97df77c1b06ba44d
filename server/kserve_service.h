#ifndef DMLSERVE_SERVER_KSERVE_SERVICE_H_
#define DMLSERVE_SERVER_KSERVE_SERVICE_H_

// inference.GRPCInferenceService, the KServe v2 / Open Inference Protocol, on
// the native API's port and callback threads. ModelInfer runs through the
// same RequestExecutor as dmlserve.v1's Execute (one scheduler, batching,
// limits, metrics and drain); kserve_translation.h maps the messages.
//
//  - ServerLive: true while the process serves at all.
//  - ServerReady / ModelReady: true while a device can run requests and the
//    server is not draining (as gRPC health's SERVING); ModelReady of an
//    unknown model is NOT_FOUND.
//  - ServerMetadata: name "dmlserve", the version, no extensions.
//  - ModelMetadata: kserve::ModelMetadata.
//
// ModelInfer takes raw bytes (wire_messages.h), so that a message that does
// not parse is INVALID_ARGUMENT, as on the native API.

#include <string>

#include "grpcpp/grpcpp.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "scheduler/scheduler.h"
#include "server/drain_gate.h"
#include "server/request_executor.h"

namespace dmlserve {

using RawInferenceService = inference::GRPCInferenceService::WithRawCallbackMethod_ModelInfer<
    inference::GRPCInferenceService::CallbackService>;

class KServeService final : public RawInferenceService {
 public:
  // All must outlive the service.
  KServeService(const Scheduler* scheduler, RequestExecutor* executor, DrainGate* gate,
                std::string version);

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;

 private:
  // A device serves and the server does not drain.
  bool Ready() const;

  const Scheduler* scheduler_;
  RequestExecutor* executor_;
  DrainGate* gate_;
  const std::string version_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_KSERVE_SERVICE_H_
