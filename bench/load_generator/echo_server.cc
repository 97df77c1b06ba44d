// dmlserve-echo: the ceiling no dmlserve request can beat on a machine.
//
// A bare gRPC callback server with dmlserve's Execute method that computes
// nothing: it parses the request, moves the request's first tensor (a scan's
// input, a matrix multiply's A) into the response's output and answers at
// once, on the gRPC thread that received the call. Its requests and responses
// are dmlserve's own messages of the same sizes, so `dmlserve-load
// --compare_echo` can run both with the same client and print dmlserve's
// throughput and latency as ratios to this one.
//
// It prints "dmlserve-echo: serving gRPC on HOST:PORT" once it listens and
// exits on SIGTERM or SIGINT.

#include <csignal>
#include <iostream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/synchronization/mutex.h"
#include "dmlserve/v1/dmlserve.grpc.pb.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:0", "gRPC address (port 0: a free one)");

namespace dmlserve::load {
namespace {

v1::Tensor* FirstTensor(v1::ExecuteRequest& request) {
  switch (request.operator_case()) {
    case v1::ExecuteRequest::kCumulativeSummation:
      return request.mutable_cumulative_summation()->mutable_input();
    case v1::ExecuteRequest::kCumulativeProduct:
      return request.mutable_cumulative_product()->mutable_input();
    case v1::ExecuteRequest::kQuantizedLinearMatrixMultiply:
      return request.mutable_quantized_linear_matrix_multiply()->mutable_a();
    default:
      return nullptr;
  }
}

class EchoService final : public v1::OperatorService::CallbackService {
  grpc::ServerUnaryReactor* Execute(grpc::CallbackServerContext* context,
                                    const v1::ExecuteRequest* request,
                                    v1::ExecuteResponse* response) override {
    // gRPC does not read the request after handing it over (as in dmlserve's
    // own service), so its tensor is moved rather than copied.
    auto* mutable_request = const_cast<v1::ExecuteRequest*>(request);
    response->set_request_id(mutable_request->request_id());
    if (v1::Tensor* tensor = FirstTensor(*mutable_request))
      response->mutable_output()->Swap(tensor);
    response->mutable_info()->set_device("echo");
    response->mutable_info()->set_batch_size(1);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  // The load generator registers a shared B before it starts; echo accepts it
  // and keeps nothing.
  grpc::ServerUnaryReactor* RegisterTensor(grpc::CallbackServerContext* context,
                                           const v1::RegisterTensorRequest* request,
                                           v1::RegisterTensorResponse* response) override {
    response->set_tensor_id(request->tensor().tensor_id());
    response->set_byte_size(request->tensor().data().size());
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* ReleaseTensor(grpc::CallbackServerContext* context,
                                          const v1::ReleaseTensorRequest*,
                                          v1::ReleaseTensorResponse*) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const v1::GetServerInfoRequest*,
                                          v1::GetServerInfoResponse* response) override {
    response->set_version("echo (computes nothing)");
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

int Run() {
  EchoService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen), grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::cerr << "dmlserve-echo: cannot listen on " << absl::GetFlag(FLAGS_listen) << "\n";
    return 2;
  }
  std::string host = absl::GetFlag(FLAGS_listen);
  host = host.substr(0, host.rfind(':'));
  std::cout << "dmlserve-echo: serving gRPC on " << host << ":" << port << std::endl;

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  int received = 0;
  sigwait(&signals, &received);
  server->Shutdown();
  return 0;
}

}  // namespace
}  // namespace dmlserve::load

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "A gRPC server with dmlserve's Execute that computes nothing, the ceiling for "
      "dmlserve-load --compare_echo.\n  dmlserve-echo --listen=127.0.0.1:0");
  // Blocked before any thread starts, so every thread leaves them to sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // As in dmlserve itself (server/main.cc): Debian's Abseil checks lock order
  // on every Mutex, gRPC's included; both sides of a comparison turn it off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::ParseCommandLine(argc, argv);
  return dmlserve::load::Run();
}
