#include "client/cpp/client.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cpp/status_conversion.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace dmlserve::client {

// Keeps the generated health stub out of client.h.
class Client::HealthStub {
 public:
  explicit HealthStub(const std::shared_ptr<grpc::Channel>& channel)
      : stub(grpc::health::v1::Health::NewStub(channel)) {}
  std::unique_ptr<grpc::health::v1::Health::Stub> stub;
};

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& address,
                                                        const ClientOptions& options) {
  if (address.empty()) return absl::InvalidArgumentError("empty server address");
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  arguments.SetMaxSendMessageSize(options.max_send_message_bytes);
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      options.credentials ? options.credentials : grpc::InsecureChannelCredentials();
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(address, credentials, arguments);
  if (options.connect_timeout > absl::ZeroDuration() &&
      !channel->WaitForConnected(absl::ToChronoTime(absl::Now() + options.connect_timeout))) {
    return absl::UnavailableError(absl::StrCat("could not connect to ", address, " within ",
                                               absl::FormatDuration(options.connect_timeout)));
  }
  return FromChannel(std::move(channel), options);
}

std::unique_ptr<Client> Client::FromChannel(std::shared_ptr<grpc::Channel> channel,
                                            const ClientOptions& options) {
  return std::unique_ptr<Client>(new Client(std::move(channel), options));
}

Client::Client(std::shared_ptr<grpc::Channel> channel, const ClientOptions& options)
    : channel_(std::move(channel)),
      options_(options),
      stub_(v1::OperatorService::NewStub(channel_)),
      health_stub_(std::make_unique<HealthStub>(channel_)) {}

Client::~Client() = default;

std::unique_ptr<grpc::ClientContext> Client::MakeContext(const CallOptions& call) const {
  auto context = std::make_unique<grpc::ClientContext>();
  absl::Time deadline = call.deadline;
  if (deadline == absl::InfiniteFuture() && options_.default_timeout != absl::InfiniteDuration()) {
    deadline = absl::Now() + options_.default_timeout;
  }
  if (deadline != absl::InfiniteFuture()) context->set_deadline(absl::ToChronoTime(deadline));
  context->set_wait_for_ready(options_.wait_for_ready);
  return context;
}

absl::StatusOr<v1::ExecuteResponse> Client::Execute(const v1::ExecuteRequest& request,
                                                    const CallOptions& call) {
  std::unique_ptr<grpc::ClientContext> context = MakeContext(call);
  v1::ExecuteResponse response;
  absl::Status status = FromGrpcStatus(stub_->Execute(context.get(), request, &response));
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<v1::ExecuteResponse> Client::CumulativeSummation(const v1::Tensor& input,
                                                                const ScanOptions& scan,
                                                                const CallOptions& call) {
  return Execute(CumulativeSummationRequest(input, scan), call);
}

absl::StatusOr<v1::ExecuteResponse> Client::CumulativeProduct(const v1::Tensor& input,
                                                              const ScanOptions& scan,
                                                              const CallOptions& call) {
  return Execute(CumulativeProductRequest(input, scan), call);
}

absl::StatusOr<v1::ExecuteResponse> Client::QuantizedLinearMatrixMultiply(
    const QuantizedMatMulInputs& inputs, const CallOptions& call) {
  return Execute(QuantizedLinearMatrixMultiplyRequest(inputs), call);
}

std::unique_ptr<StreamSession> Client::OpenStream(const CallOptions& call) {
  return std::make_unique<StreamSession>(stub_.get(), MakeContext(call));
}

absl::StatusOr<std::vector<absl::StatusOr<v1::ExecuteResponse>>> Client::ExecuteMany(
    std::vector<v1::ExecuteRequest> requests, const CallOptions& call) {
  absl::flat_hash_map<std::string, size_t> index_of;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].request_id().empty()) {
      requests[i].set_request_id(absl::StrCat("request-", i));
    }
    if (!index_of.emplace(requests[i].request_id(), i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate request_id \"", requests[i].request_id(), "\""));
    }
  }

  std::vector<std::optional<absl::StatusOr<v1::ExecuteResponse>>> answers(requests.size());
  std::unique_ptr<StreamSession> session = OpenStream(call);
  // Writing on its own thread keeps both directions flowing: a server that
  // answers while it reads would otherwise stall once flow control fills up.
  std::thread writer([&session, &requests] {
    for (const v1::ExecuteRequest& request : requests) {
      if (!session->Send(request).ok()) return;
    }
    session->CloseSend().IgnoreError();
  });
  absl::Status protocol_error;
  while (std::optional<v1::ExecuteResponse> response = session->Receive()) {
    auto it = index_of.find(response->request_id());
    if (it == index_of.end() || answers[it->second].has_value()) {
      protocol_error = absl::InternalError(
          absl::StrCat("unexpected response for request_id \"", response->request_id(), "\""));
      continue;
    }
    absl::Status item_status = FromRpcStatus(response->status());
    if (item_status.ok()) {
      answers[it->second] = std::move(*response);
    } else {
      answers[it->second] = item_status;
    }
  }
  writer.join();
  absl::Status stream_status = session->Finish();
  if (!protocol_error.ok()) return protocol_error;
  const bool any_answer =
      std::any_of(answers.begin(), answers.end(), [](const auto& a) { return a.has_value(); });
  if (!stream_status.ok() && !any_answer) return stream_status;

  std::vector<absl::StatusOr<v1::ExecuteResponse>> results;
  results.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    if (answers[i].has_value()) {
      results.push_back(std::move(*answers[i]));
    } else if (!stream_status.ok()) {
      results.push_back(stream_status);
    } else {
      results.push_back(
          absl::InternalError(absl::StrCat("the stream ended without a response for request_id \"",
                                           requests[i].request_id(), "\"")));
    }
  }
  return results;
}

absl::StatusOr<v1::RegisterTensorResponse> Client::RegisterTensor(const v1::Tensor& tensor,
                                                                  const std::string& tensor_id,
                                                                  const CallOptions& call) {
  v1::RegisterTensorRequest request;
  *request.mutable_tensor() = tensor;
  if (!tensor_id.empty()) request.mutable_tensor()->set_tensor_id(tensor_id);
  std::unique_ptr<grpc::ClientContext> context = MakeContext(call);
  v1::RegisterTensorResponse response;
  absl::Status status = FromGrpcStatus(stub_->RegisterTensor(context.get(), request, &response));
  if (!status.ok()) return status;
  return response;
}

absl::Status Client::ReleaseTensor(const std::string& tensor_id, const CallOptions& call) {
  v1::ReleaseTensorRequest request;
  request.set_tensor_id(tensor_id);
  std::unique_ptr<grpc::ClientContext> context = MakeContext(call);
  v1::ReleaseTensorResponse response;
  return FromGrpcStatus(stub_->ReleaseTensor(context.get(), request, &response));
}

absl::StatusOr<v1::GetServerInfoResponse> Client::GetServerInfo(const CallOptions& call) {
  std::unique_ptr<grpc::ClientContext> context = MakeContext(call);
  v1::GetServerInfoResponse response;
  absl::Status status =
      FromGrpcStatus(stub_->GetServerInfo(context.get(), v1::GetServerInfoRequest(), &response));
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<HealthStatus> Client::CheckHealth(const std::string& service,
                                                 const CallOptions& call) {
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  std::unique_ptr<grpc::ClientContext> context = MakeContext(call);
  grpc::health::v1::HealthCheckResponse response;
  absl::Status status =
      FromGrpcStatus(health_stub_->stub->Check(context.get(), request, &response));
  if (!status.ok()) return status;
  switch (response.status()) {
    case grpc::health::v1::HealthCheckResponse::SERVING:
      return HealthStatus::kServing;
    case grpc::health::v1::HealthCheckResponse::NOT_SERVING:
      return HealthStatus::kNotServing;
    case grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN:
      return HealthStatus::kServiceUnknown;
    default:
      return HealthStatus::kUnknown;
  }
}

}  // namespace dmlserve::client
