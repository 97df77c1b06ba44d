#include "client/cpp/client.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/cpp/status_conversion.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace dmlserve::client {

namespace {

// A call worth sending to the next replica: refused by a replica that stopped
// or is stopping (UNAVAILABLE), or dropped by it (CANCELLED: this client
// cancels none of these calls itself, and a gRPC server cancels calls that
// reach it after its shutdown began). An Execute has no side effects, so a
// retry is safe even when the first replica did compute it.
bool TryNextReplica(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsCancelled(status);
}

// Streams ExecuteMany opens over a dns: target's balanced channel before it
// gives up on the requests left unanswered: as many as the channel's retry
// policy allows a call (endpoint_set.cc, kBalancedServiceConfig).
constexpr int kBalancedStreamTries = 5;

// `status` with " (replica NAME)" added when there are several replicas.
absl::Status NameReplica(const absl::Status& status, const Endpoint& endpoint, size_t replicas) {
  if (status.ok() || replicas <= 1) return status;
  return absl::Status(status.code(),
                      absl::StrCat(status.message(), " (replica ", endpoint.name, ")"));
}

// An id every replica shares, for a tensor registered without one.
std::string GenerateTensorId() {
  absl::BitGen bitgen;
  return absl::StrFormat("t-%016x%016x", absl::Uniform<uint64_t>(bitgen),
                         absl::Uniform<uint64_t>(bitgen));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& address,
                                                        const ClientOptions& options) {
  absl::StatusOr<std::unique_ptr<EndpointSet>> endpoints = EndpointSet::Create(address, options);
  if (!endpoints.ok()) return endpoints.status();
  if (options.connect_timeout > absl::ZeroDuration()) {
    // Ready once any replica is: the others connect on their own meanwhile.
    const absl::Time deadline = absl::Now() + options.connect_timeout;
    bool connected = false;
    while (!connected) {
      for (size_t i = 0; i < (*endpoints)->rotation_size() && !connected; ++i) {
        std::shared_ptr<const Endpoint> endpoint = (*endpoints)->Next();
        const absl::Time until = std::min(deadline, absl::Now() + absl::Milliseconds(100));
        connected = endpoint->channel->WaitForConnected(absl::ToChronoTime(until));
      }
      if (!connected && absl::Now() >= deadline) {
        return absl::UnavailableError(absl::StrCat("could not connect to ", address, " within ",
                                                   absl::FormatDuration(options.connect_timeout)));
      }
    }
  }
  return std::unique_ptr<Client>(new Client(*std::move(endpoints), options));
}

std::unique_ptr<Client> Client::FromChannel(std::shared_ptr<grpc::Channel> channel,
                                            const ClientOptions& options) {
  return std::unique_ptr<Client>(new Client(EndpointSet::ForChannel(std::move(channel)), options));
}

Client::Client(std::unique_ptr<EndpointSet> endpoints, const ClientOptions& options)
    : endpoints_(std::move(endpoints)), options_(options) {}

Client::~Client() = default;

CallOptions Client::WithDefaultDeadline(const CallOptions& call) const {
  CallOptions with = call;
  if (with.deadline == absl::InfiniteFuture() &&
      options_.default_timeout != absl::InfiniteDuration()) {
    with.deadline = absl::Now() + options_.default_timeout;
  }
  return with;
}

std::unique_ptr<grpc::ClientContext> Client::MakeContext(const CallOptions& call) const {
  auto context = std::make_unique<grpc::ClientContext>();
  const absl::Time deadline = WithDefaultDeadline(call).deadline;
  if (deadline != absl::InfiniteFuture()) context->set_deadline(absl::ToChronoTime(deadline));
  context->set_wait_for_ready(options_.wait_for_ready);
  return context;
}

absl::Status Client::OnReplicas(absl::FunctionRef<absl::Status(const Endpoint&)> attempt) {
  const size_t replicas = endpoints_->rotation_size();
  absl::Status status;
  size_t turn = 0;
  for (size_t i = 0; i < replicas; ++i) {
    std::shared_ptr<const Endpoint> endpoint =
        i == 0 ? endpoints_->Next(&turn) : endpoints_->Retry(turn, i);
    status = attempt(*endpoint);
    if (status.ok()) return status;
    status = NameReplica(status, *endpoint, replicas);
    if (!TryNextReplica(status)) break;
  }
  return status;
}

absl::StatusOr<v1::ExecuteResponse> Client::Execute(const v1::ExecuteRequest& request,
                                                    const CallOptions& call) {
  const CallOptions once = WithDefaultDeadline(call);
  v1::ExecuteResponse response;
  absl::Status status = OnReplicas([&](const Endpoint& endpoint) {
    std::unique_ptr<grpc::ClientContext> context = MakeContext(once);
    return FromGrpcStatus(endpoint.stub->Execute(context.get(), request, &response));
  });
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
  // The endpoints Next() rotates over live as long as the client.
  return std::make_unique<StreamSession>(endpoints_->Next()->stub.get(), MakeContext(call));
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

  const CallOptions once = WithDefaultDeadline(call);
  std::vector<std::optional<absl::StatusOr<v1::ExecuteResponse>>> answers(requests.size());
  // A stream that a replica refused or broke off (one that stopped) goes to
  // the next replica with the requests it left unanswered: executing one
  // again is harmless (an operator has no side effects).
  // Over a dns: target's balanced channel each new stream may reach another
  // replica: as many tries as the channel's retry policy gives a call.
  const int tries = endpoints_->balanced() ? kBalancedStreamTries : 1;
  absl::Status protocol_error;
  absl::Status status;
  for (int t = 0; t < tries; ++t) {
    status = OnReplicas([&](const Endpoint& endpoint) {
      // A stream that failed after its last answer leaves nothing to send.
      if (!requests.empty() && std::all_of(answers.begin(), answers.end(),
                                           [](const auto& a) { return a.has_value(); })) {
        return absl::OkStatus();
      }
      const absl::Status stream_status =
          ExecuteManyOnce(endpoint, requests, index_of, once, answers, protocol_error);
      return protocol_error.ok() ? stream_status : absl::OkStatus();
    });
    if (status.ok() || !TryNextReplica(status)) break;
  }
  if (!protocol_error.ok()) return protocol_error;
  const bool any_answer =
      std::any_of(answers.begin(), answers.end(), [](const auto& a) { return a.has_value(); });
  if (!status.ok() && !any_answer) return status;

  std::vector<absl::StatusOr<v1::ExecuteResponse>> results;
  results.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    if (answers[i].has_value()) {
      results.push_back(std::move(*answers[i]));
    } else if (!status.ok()) {
      results.push_back(status);
    } else {
      results.push_back(
          absl::InternalError(absl::StrCat("the stream ended without a response for request_id \"",
                                           requests[i].request_id(), "\"")));
    }
  }
  return results;
}

absl::Status Client::ExecuteManyOnce(
    const Endpoint& endpoint, const std::vector<v1::ExecuteRequest>& requests,
    const absl::flat_hash_map<std::string, size_t>& index_of, const CallOptions& call,
    std::vector<std::optional<absl::StatusOr<v1::ExecuteResponse>>>& answers,
    absl::Status& protocol_error) {
  // Only the requests still without an answer are sent.
  std::vector<size_t> to_send;
  std::vector<bool> sent_here(requests.size(), false);
  for (size_t i = 0; i < requests.size(); ++i) {
    if (answers[i].has_value()) continue;
    to_send.push_back(i);
    sent_here[i] = true;
  }
  auto session = std::make_unique<StreamSession>(endpoint.stub.get(), MakeContext(call));
  // Writing on its own thread keeps both directions flowing: a server that
  // answers while it reads would otherwise stall once flow control fills up.
  std::thread writer([&session, &requests, &to_send] {
    for (size_t i : to_send) {
      if (!session->Send(requests[i]).ok()) return;
    }
    session->CloseSend().IgnoreError();
  });
  while (std::optional<v1::ExecuteResponse> response = session->Receive()) {
    auto it = index_of.find(response->request_id());
    if (it == index_of.end() || !sent_here[it->second] || answers[it->second].has_value()) {
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
  return session->Finish();
}

absl::StatusOr<v1::RegisterTensorResponse> Client::RegisterTensor(const v1::Tensor& tensor,
                                                                  const std::string& tensor_id,
                                                                  const CallOptions& call) {
  absl::StatusOr<std::vector<std::shared_ptr<const Endpoint>>> replicas = endpoints_->Replicas();
  if (!replicas.ok()) return replicas.status();
  v1::RegisterTensorRequest request;
  *request.mutable_tensor() = tensor;
  if (!tensor_id.empty()) {
    request.mutable_tensor()->set_tensor_id(tensor_id);
  } else if (replicas->size() > 1) {
    request.mutable_tensor()->set_tensor_id(GenerateTensorId());
  }
  const CallOptions once = WithDefaultDeadline(call);
  v1::RegisterTensorResponse response;
  std::vector<std::string> registered;
  for (const std::shared_ptr<const Endpoint>& endpoint : *replicas) {
    std::unique_ptr<grpc::ClientContext> context = MakeContext(once);
    absl::Status status =
        FromGrpcStatus(endpoint->stub->RegisterTensor(context.get(), request, &response));
    if (!status.ok()) {
      if (replicas->size() == 1) return status;
      return absl::Status(
          status.code(),
          absl::StrCat("RegisterTensor refused by replica ", endpoint->name, ": ", status.message(),
                       registered.empty()
                           ? std::string(" (no replica registered it)")
                           : absl::StrCat(" (registered on ", absl::StrJoin(registered, ", "),
                                          "; ReleaseTensor removes it there)")));
    }
    registered.push_back(endpoint->name);
  }
  return response;
}

absl::Status Client::ReleaseTensor(const std::string& tensor_id, const CallOptions& call) {
  absl::StatusOr<std::vector<std::shared_ptr<const Endpoint>>> replicas = endpoints_->Replicas();
  if (!replicas.ok()) return replicas.status();
  v1::ReleaseTensorRequest request;
  request.set_tensor_id(tensor_id);
  const CallOptions once = WithDefaultDeadline(call);
  absl::Status not_found;
  size_t released = 0;
  for (const std::shared_ptr<const Endpoint>& endpoint : *replicas) {
    std::unique_ptr<grpc::ClientContext> context = MakeContext(once);
    v1::ReleaseTensorResponse response;
    absl::Status status =
        FromGrpcStatus(endpoint->stub->ReleaseTensor(context.get(), request, &response));
    if (status.ok()) {
      ++released;
    } else if (absl::IsNotFound(status)) {
      not_found = NameReplica(status, *endpoint, replicas->size());
    } else {
      return replicas->size() == 1
                 ? status
                 : absl::Status(status.code(),
                                absl::StrCat("ReleaseTensor refused by replica ", endpoint->name,
                                             ": ", status.message()));
    }
  }
  return released > 0 ? absl::OkStatus() : not_found;
}

absl::StatusOr<v1::GetServerInfoResponse> Client::GetServerInfo(const CallOptions& call) {
  std::unique_ptr<grpc::ClientContext> context = MakeContext(call);
  v1::GetServerInfoResponse response;
  std::shared_ptr<const Endpoint> endpoint = endpoints_->Next();
  absl::Status status = FromGrpcStatus(
      endpoint->stub->GetServerInfo(context.get(), v1::GetServerInfoRequest(), &response));
  if (!status.ok()) return NameReplica(status, *endpoint, endpoints_->rotation_size());
  return response;
}

absl::StatusOr<HealthStatus> Client::CheckHealth(const std::string& service,
                                                 const CallOptions& call) {
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  std::unique_ptr<grpc::ClientContext> context = MakeContext(call);
  grpc::health::v1::HealthCheckResponse response;
  std::shared_ptr<const Endpoint> endpoint = endpoints_->Next();
  auto stub = grpc::health::v1::Health::NewStub(endpoint->channel);
  absl::Status status = FromGrpcStatus(stub->Check(context.get(), request, &response));
  if (!status.ok()) return NameReplica(status, *endpoint, endpoints_->rotation_size());
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
