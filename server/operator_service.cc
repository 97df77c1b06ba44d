#include "server/operator_service.h"

#include <atomic>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "server/client_deadline.h"
#include "server/execute_stream_reactor.h"
#include "server/request_decoder.h"
#include "server/server_info.h"
#include "server/status_conversion.h"

namespace dmlserve {
namespace {

grpc::Status ShuttingDown() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down");
}

// One unary Execute.
//
// Cheap requests on an idle server are answered inside the handler (the
// scheduler runs them on this thread). For those the handler finishes gRPC's
// default reactor instead of returning this one: gRPC runs the default
// reactor's completion inline, but schedules OnDone of an application reactor
// on its executor thread, a thread hop per call that cost a fifth of the
// server's CPU under load. Calls that wait for a device return this reactor,
// which cancels their job when the client goes away (OnCancel) and is
// finished from the device's thread.
//
// gRPC binds a returned reactor (and may call OnCancel) only after the handler
// returns it, and calls OnDone only after that and Finish, so finishing it
// from another thread even before the handler returns is safe.
class ExecuteCall final : public grpc::ServerUnaryReactor {
 public:
  static grpc::ServerUnaryReactor* Start(grpc::CallbackServerContext* context,
                                         const v1::ExecuteRequest* request,
                                         v1::ExecuteResponse* response, RequestExecutor* executor,
                                         DrainGate* gate) {
    if (!gate->TryEnter()) {
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      reactor->Finish(ShuttingDown());
      return reactor;
    }
    auto* call = new ExecuteCall(response, gate);
    // gRPC owns the request for the whole call and does not read it after
    // handing it over; moving the tensor payloads out of it instead of
    // copying saves up to --max_request_bytes of copying per request.
    auto* mutable_request = const_cast<v1::ExecuteRequest*>(request);
    executor->Execute(
        mutable_request, ClientDeadline(*context),
        [call](std::shared_ptr<Job> job) { call->job_ = std::move(job); },
        [call](absl::Status status, v1::ExecuteResponse result, MemoryBudget::Reservation held) {
          call->OnAnswer(std::move(status), std::move(result), std::move(held));
        });
    State expected = State::kRunning;
    if (call->state_.compare_exchange_strong(expected, State::kReturned,
                                             std::memory_order_acq_rel)) {
      return call;  // answered later, through Finish
    }
    // Answered already: finish the default reactor (which serializes the
    // response before it returns), then release what the call held.
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(call->status_));
    delete call;
    gate->Exit();
    return reactor;
  }

  void OnCancel() override {
    if (job_ != nullptr) job_->Cancel();
  }
  void OnDone() override {
    gate_->Exit();
    delete this;
  }

 private:
  enum class State { kRunning, kReturned, kAnswered };

  ExecuteCall(v1::ExecuteResponse* response, DrainGate* gate) : response_(response), gate_(gate) {}

  void OnAnswer(absl::Status status, v1::ExecuteResponse result, MemoryBudget::Reservation held) {
    if (status.ok()) *response_ = std::move(result);
    status_ = std::move(status);
    // Released in OnDone (or by Start), once the response is serialized.
    held_ = std::move(held);
    State expected = State::kRunning;
    if (state_.compare_exchange_strong(expected, State::kAnswered, std::memory_order_acq_rel)) {
      return;  // still inside Start, which finishes the call
    }
    Finish(ToGrpcStatus(status_));
  }

  v1::ExecuteResponse* const response_;
  DrainGate* const gate_;
  std::atomic<State> state_{State::kRunning};
  absl::Status status_;
  MemoryBudget::Reservation held_;
  // Set before the job is submitted, read only by OnCancel (after binding).
  std::shared_ptr<Job> job_;
};

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
                                                   const v1::ExecuteRequest* request,
                                                   v1::ExecuteResponse* response) {
  return ExecuteCall::Start(context, request, response, &executor_, gate_);
}

grpc::ServerBidiReactor<v1::ExecuteRequest, v1::ExecuteResponse>* OperatorService::ExecuteStream(
    grpc::CallbackServerContext* context) {
  // One maximal request's worth of output: a stream of huge-output items
  // holds about that much (plus the item in hand), not max_queue times it.
  return new ExecuteStreamReactor(context, &executor_, gate_, scheduler_->options().max_queue,
                                  options_.max_request_bytes);
}

grpc::ServerUnaryReactor* OperatorService::RegisterTensor(grpc::CallbackServerContext* context,
                                                          const v1::RegisterTensorRequest* request,
                                                          v1::RegisterTensorResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (gate_->draining()) {
    reactor->Finish(ShuttingDown());
    return reactor;
  }
  // See ExecuteReactor on moving payloads out of the request.
  v1::Tensor* proto = const_cast<v1::RegisterTensorRequest*>(request)->mutable_tensor();
  const std::string requested_id = proto->tensor_id();
  absl::StatusOr<Tensor> tensor = DecodeTensorData(proto, "tensor", options_.max_request_bytes);
  if (!tensor.ok()) {
    reactor->Finish(ToGrpcStatus(tensor.status()));
    return reactor;
  }
  const uint64_t byte_size = tensor->byte_size();
  absl::StatusOr<std::string> id = tensors_->Register(requested_id, *std::move(tensor));
  if (!id.ok()) {
    reactor->Finish(ToGrpcStatus(id.status()));
    return reactor;
  }
  response->set_tensor_id(*std::move(id));
  response->set_byte_size(byte_size);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* OperatorService::ReleaseTensor(grpc::CallbackServerContext* context,
                                                         const v1::ReleaseTensorRequest* request,
                                                         v1::ReleaseTensorResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (gate_->draining()) {
    reactor->Finish(ShuttingDown());
    return reactor;
  }
  reactor->Finish(ToGrpcStatus(tensors_->Release(request->tensor_id())));
  return reactor;
}

grpc::ServerUnaryReactor* OperatorService::GetServerInfo(grpc::CallbackServerContext* context,
                                                         const v1::GetServerInfoRequest* request,
                                                         v1::GetServerInfoResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (gate_->draining()) {
    reactor->Finish(ShuttingDown());
    return reactor;
  }
  *response = BuildServerInfo(options_.version, options_.max_request_bytes, options_.adapters,
                              *scheduler_, *tensors_);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace dmlserve
