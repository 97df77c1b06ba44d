#ifndef DMLSERVE_CLIENT_CPP_CLIENT_H_
#define DMLSERVE_CLIENT_CPP_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cpp/client_options.h"
#include "client/cpp/health_status.h"
#include "client/cpp/request_builders.h"
#include "client/cpp/stream_session.h"
#include "dmlserve/v1/dmlserve.grpc.pb.h"
#include "dmlserve/v1/dmlserve.pb.h"
#include "grpcpp/channel.h"

namespace dmlserve::client {

// A connection to a dmlserve server. Every call reports failures as an
// absl::Status carrying the gRPC code and the server's message. Thread-safe:
// one Client may serve many threads.
class Client {
 public:
  // `address` is "host:port" (any gRPC target, e.g. "dns:///name:50051").
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& address,
                                                         const ClientOptions& options = {});
  static std::unique_ptr<Client> FromChannel(std::shared_ptr<grpc::Channel> channel,
                                             const ClientOptions& options = {});

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  absl::StatusOr<v1::ExecuteResponse> Execute(const v1::ExecuteRequest& request,
                                              const CallOptions& call = {});
  absl::StatusOr<v1::ExecuteResponse> CumulativeSummation(const v1::Tensor& input,
                                                          const ScanOptions& scan,
                                                          const CallOptions& call = {});
  absl::StatusOr<v1::ExecuteResponse> CumulativeProduct(const v1::Tensor& input,
                                                        const ScanOptions& scan,
                                                        const CallOptions& call = {});
  absl::StatusOr<v1::ExecuteResponse> QuantizedLinearMatrixMultiply(
      const QuantizedMatMulInputs& inputs, const CallOptions& call = {});

  // A bidirectional ExecuteStream call; the deadline covers the whole stream.
  std::unique_ptr<StreamSession> OpenStream(const CallOptions& call = {});

  // Sends `requests` on one stream while reading the answers, and returns them
  // in the order of `requests`: each the response or that item's error.
  // Requests without a request_id get a generated one; duplicate ids are
  // INVALID_ARGUMENT. When the stream itself fails before any answer, that
  // is the error; after some answers, the unanswered items carry it.
  absl::StatusOr<std::vector<absl::StatusOr<v1::ExecuteResponse>>> ExecuteMany(
      std::vector<v1::ExecuteRequest> requests, const CallOptions& call = {});

  // Keeps `tensor` (with data) on the server. A non-empty `tensor_id` names
  // it; otherwise the server generates the id it returns.
  absl::StatusOr<v1::RegisterTensorResponse> RegisterTensor(const v1::Tensor& tensor,
                                                            const std::string& tensor_id = "",
                                                            const CallOptions& call = {});
  absl::Status ReleaseTensor(const std::string& tensor_id, const CallOptions& call = {});

  absl::StatusOr<v1::GetServerInfoResponse> GetServerInfo(const CallOptions& call = {});

  // grpc.health.v1.Health/Check; an empty `service` asks about the server as a
  // whole.
  absl::StatusOr<HealthStatus> CheckHealth(const std::string& service = "",
                                           const CallOptions& call = {});

  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  class HealthStub;

  Client(std::shared_ptr<grpc::Channel> channel, const ClientOptions& options);
  std::unique_ptr<grpc::ClientContext> MakeContext(const CallOptions& call) const;

  std::shared_ptr<grpc::Channel> channel_;
  ClientOptions options_;
  std::unique_ptr<v1::OperatorService::Stub> stub_;
  std::unique_ptr<HealthStub> health_stub_;
};

}  // namespace dmlserve::client

#endif  // DMLSERVE_CLIENT_CPP_CLIENT_H_
