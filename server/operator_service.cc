#include "server/operator_service.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/client_deadline.h"
#include "server/execute_stream_reactor.h"
#include "server/request_arena.h"
#include "server/request_decoder.h"
#include "server/server_info.h"
#include "server/status_conversion.h"
#include "server/wire_messages.h"

namespace dmlserve {
namespace {

// The small unary RPCs (all but Execute): refused while draining, the
// request parsed (INVALID_ARGUMENT when it does not), then `handle` makes the
// response or the error, and the call is finished on this thread.
template <typename Request, typename Handle>
grpc::ServerUnaryReactor* ServeUnary(grpc::CallbackServerContext* context, const DrainGate& gate,
                                     const grpc::ByteBuffer* request_bytes,
                                     grpc::ByteBuffer* response_bytes, Handle handle) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (gate.draining()) {
    reactor->Finish(ToGrpcStatus(DrainGate::Refusal()));
    return reactor;
  }
  Request request;
  if (absl::Status parsed = ParseMessage(*request_bytes, &request); !parsed.ok()) {
    reactor->Finish(ToGrpcStatus(parsed));
    return reactor;
  }
  auto response = handle(request);  // absl::StatusOr<Response>
  reactor->Finish(response.ok() ? SerializeMessage(*response, response_bytes)
                                : ToGrpcStatus(response.status()));
  return reactor;
}

}  // namespace

OperatorService::OperatorService(Scheduler* scheduler, TensorRegistry* tensors,
                                 ServiceMetrics* metrics, DrainGate* gate, MemoryBudget* budget,
                                 OperatorServiceOptions options)
    : scheduler_(scheduler),
      tensors_(tensors),
      gate_(gate),
      options_(std::move(options)),
      executor_(scheduler, tensors, metrics, options_.max_request_bytes, budget) {}

grpc::ServerUnaryReactor* OperatorService::Execute(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request_bytes,
                                                   grpc::ByteBuffer* response_bytes) {
  // gRPC's default reactor, finished from whichever thread has the answer:
  // the handler's own (a cheap job the scheduler ran right here) or a device
  // thread. gRPC runs its completion inline, whereas an application reactor's
  // OnDone is scheduled on gRPC's executor thread, a thread hop per call that
  // cost a fifth of the server's CPU under load. It reports no cancellation,
  // so the job polls the call instead (Job::cancelled_elsewhere): a call the
  // client cancelled, or whose deadline passed, is dropped when its batch
  // forms and never computed.
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!gate_->TryEnter()) {
    reactor->Finish(ToGrpcStatus(DrainGate::Refusal()));
    return reactor;
  }
  // The executor reads the request only while Execute runs (its payloads
  // move into the job), so it lives on this stack (see RequestArena).
  RequestArena arena;
  v1::ExecuteRequest& request = arena.Create<v1::ExecuteRequest>();
  if (absl::Status parsed = ParseMessage(*request_bytes, &request); !parsed.ok()) {
    executor_.RecordUnparsable(request_bytes->Length(), parsed);
    reactor->Finish(ToGrpcStatus(parsed));
    gate_->Exit();
    return reactor;
  }
  executor_.Execute(
      &request, ClientDeadline(*context),
      [context](std::shared_ptr<Job> job) {
        job->cancelled_elsewhere = [context] { return context->IsCancelled(); };
      },
      [reactor, response_bytes, gate = gate_](absl::Status status, v1::ExecuteResponse* result,
                                              MemoryBudget::Reservation held) {
        grpc::Status answer = ToGrpcStatus(status);
        if (status.ok()) answer = SerializeMessage(*result, response_bytes);
        // The response is serialized; then the memory it held (`held`,
        // released as this returns) and the drain gate go.
        reactor->Finish(answer);
        gate->Exit();
      });
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* OperatorService::ExecuteStream(
    grpc::CallbackServerContext* context) {
  // One maximal request's worth of output: a stream of huge-output items
  // holds about that much (plus the item in hand), not max_queue times it.
  return new ExecuteStreamReactor(context, &executor_, gate_, scheduler_->options().max_queue,
                                  options_.max_request_bytes);
}

grpc::ServerUnaryReactor* OperatorService::RegisterTensor(grpc::CallbackServerContext* context,
                                                          const grpc::ByteBuffer* request_bytes,
                                                          grpc::ByteBuffer* response_bytes) {
  return ServeUnary<v1::RegisterTensorRequest>(
      context, *gate_, request_bytes, response_bytes,
      [this](v1::RegisterTensorRequest& request) -> absl::StatusOr<v1::RegisterTensorResponse> {
        v1::Tensor* proto = request.mutable_tensor();
        const std::string requested_id = proto->tensor_id();
        absl::StatusOr<Tensor> tensor =
            DecodeTensorData(proto, "tensor", options_.max_request_bytes);
        if (!tensor.ok()) return tensor.status();
        const uint64_t byte_size = tensor->byte_size();
        absl::StatusOr<std::string> id = tensors_->Register(requested_id, *std::move(tensor));
        if (!id.ok()) return id.status();
        v1::RegisterTensorResponse response;
        response.set_tensor_id(*std::move(id));
        response.set_byte_size(byte_size);
        return response;
      });
}

grpc::ServerUnaryReactor* OperatorService::ReleaseTensor(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request_bytes,
                                                         grpc::ByteBuffer* response_bytes) {
  return ServeUnary<v1::ReleaseTensorRequest>(
      context, *gate_, request_bytes, response_bytes,
      [this](v1::ReleaseTensorRequest& request) -> absl::StatusOr<v1::ReleaseTensorResponse> {
        if (absl::Status released = tensors_->Release(request.tensor_id()); !released.ok()) {
          return released;
        }
        return v1::ReleaseTensorResponse();
      });
}

grpc::ServerUnaryReactor* OperatorService::GetServerInfo(grpc::CallbackServerContext* context,
                                                         const grpc::ByteBuffer* request_bytes,
                                                         grpc::ByteBuffer* response_bytes) {
  return ServeUnary<v1::GetServerInfoRequest>(
      context, *gate_, request_bytes, response_bytes,
      [this](v1::GetServerInfoRequest&) -> absl::StatusOr<v1::GetServerInfoResponse> {
        return BuildServerInfo(options_.version, options_.max_request_bytes, options_.adapters,
                               *scheduler_, *tensors_);
      });
}

}  // namespace dmlserve
