#include "server/kserve_service.h"

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/client_deadline.h"
#include "server/kserve_translation.h"
#include "server/request_arena.h"
#include "server/status_conversion.h"
#include "server/wire_messages.h"

namespace dmlserve {
namespace {

grpc::ServerUnaryReactor* FinishWith(grpc::CallbackServerContext* context,
                                     const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace

KServeService::KServeService(const Scheduler* scheduler, RequestExecutor* executor, DrainGate* gate,
                             std::string version)
    : scheduler_(scheduler), executor_(executor), gate_(gate), version_(std::move(version)) {}

bool KServeService::Ready() const {
  if (gate_->draining()) return false;
  for (const DeviceStatus& device : scheduler_->devices()) {
    if (device.healthy) return true;
  }
  return false;
}

grpc::ServerUnaryReactor* KServeService::ServerLive(grpc::CallbackServerContext* context,
                                                    const inference::ServerLiveRequest*,
                                                    inference::ServerLiveResponse* response) {
  response->set_live(true);
  return FinishWith(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* KServeService::ServerReady(grpc::CallbackServerContext* context,
                                                     const inference::ServerReadyRequest*,
                                                     inference::ServerReadyResponse* response) {
  response->set_ready(Ready());
  return FinishWith(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* KServeService::ModelReady(grpc::CallbackServerContext* context,
                                                    const inference::ModelReadyRequest* request,
                                                    inference::ModelReadyResponse* response) {
  if (absl::Status known = kserve::CheckModel(request->name(), request->version()); !known.ok()) {
    return FinishWith(context, ToGrpcStatus(known));
  }
  response->set_ready(Ready());
  return FinishWith(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* KServeService::ServerMetadata(
    grpc::CallbackServerContext* context, const inference::ServerMetadataRequest*,
    inference::ServerMetadataResponse* response) {
  response->set_name("dmlserve");
  response->set_version(version_);
  return FinishWith(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* KServeService::ModelMetadata(
    grpc::CallbackServerContext* context, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  if (absl::Status known = kserve::CheckModel(request->name(), request->version()); !known.ok()) {
    return FinishWith(context, ToGrpcStatus(known));
  }
  *response = kserve::ModelMetadata(request->name());
  return FinishWith(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* KServeService::ModelInfer(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request_bytes,
                                                    grpc::ByteBuffer* response_bytes) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!gate_->TryEnter()) {
    reactor->Finish(ToGrpcStatus(DrainGate::Refusal()));
    return reactor;
  }
  // Both messages are read only while this runs (payloads move on into the
  // native request, then the job); their objects come from a stack arena.
  RequestArena arena;
  auto& infer = arena.Create<inference::ModelInferRequest>();
  absl::Status parsed = ParseMessage(*request_bytes, &infer);
  absl::StatusOr<v1::ExecuteRequest> native =
      parsed.ok() ? kserve::ToExecuteRequest(&infer) : absl::StatusOr<v1::ExecuteRequest>(parsed);
  if (!native.ok()) {
    // Counted like the native API's unparsable requests: under no operator.
    executor_->RecordUnparsable(request_bytes->Length(), native.status());
    reactor->Finish(ToGrpcStatus(native.status()));
    gate_->Exit();
    return reactor;
  }
  executor_->Execute(
      &*native, ClientDeadline(*context),
      [context](std::shared_ptr<Job> job) {
        job->cancelled_elsewhere = [context] { return context->IsCancelled(); };
      },
      [reactor, response_bytes, gate = gate_, model = infer.model_name()](
          absl::Status status, v1::ExecuteResponse* result, MemoryBudget::Reservation held) {
        grpc::Status answer = ToGrpcStatus(status);
        if (status.ok()) {
          answer = SerializeMessage(kserve::ToModelInferResponse(model, result), response_bytes);
        }
        reactor->Finish(answer);
        gate->Exit();
      });
  return reactor;
}

}  // namespace dmlserve
