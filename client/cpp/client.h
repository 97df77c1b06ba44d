#ifndef DMLSERVE_CLIENT_CPP_CLIENT_H_
#define DMLSERVE_CLIENT_CPP_CLIENT_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cpp/client_options.h"
#include "client/cpp/endpoint_set.h"
#include "client/cpp/health_status.h"
#include "client/cpp/request_builders.h"
#include "client/cpp/stream_session.h"
#include "dmlserve/v1/dmlserve.grpc.pb.h"
#include "dmlserve/v1/dmlserve.pb.h"
#include "grpcpp/channel.h"

namespace dmlserve::client {

// A connection to a dmlserve server, or to several replicas of it. Every call
// reports failures as an absl::Status carrying the gRPC code and the server's
// message. Thread-safe: one Client may serve many threads.
//
// With several replicas (see Connect), each call goes to the next one in
// turn; an Execute that a replica refused (UNAVAILABLE) or dropped
// (CANCELLED, as gRPC does to calls that reach a server after its shutdown
// began) is sent again to the next replica, at most once per replica, within
// the call's deadline; so are the requests of an ExecuteMany that such a
// stream left unanswered (executing a request twice is harmless: an operator
// has no side effects). A stream of OpenStream stays on the replica it
// opened on. RegisterTensor and ReleaseTensor go to every replica, so that any
// of them can serve a request naming the tensor.
class Client {
 public:
  // `address` is one of (endpoint_set.h):
  //  - "host:port" or any gRPC target: one server;
  //  - "host1:port,host2:port,...": replicas, balanced round-robin per call;
  //  - "dns:///name:port": every address the name resolves to (a Kubernetes
  //    headless Service), balanced by gRPC's round_robin policy.
  // With options.connect_timeout, waits until at least one replica is ready.
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
  // INVALID_ARGUMENT. When the stream fails (on every replica tried, see
  // above) before any answer, that is the error; after some answers, the
  // unanswered items carry it.
  absl::StatusOr<std::vector<absl::StatusOr<v1::ExecuteResponse>>> ExecuteMany(
      std::vector<v1::ExecuteRequest> requests, const CallOptions& call = {});

  // Keeps `tensor` (with data) on the server, on every replica. A non-empty
  // `tensor_id` names it; otherwise the server generates the id it returns
  // (with several replicas the client does, so that all share it). When a
  // replica refuses, the error carries its code, names that replica and those
  // that did register the tensor (ReleaseTensor removes it from them).
  absl::StatusOr<v1::RegisterTensorResponse> RegisterTensor(const v1::Tensor& tensor,
                                                            const std::string& tensor_id = "",
                                                            const CallOptions& call = {});
  // Releases the tensor on every replica. With several replicas, one that does
  // not have it (NOT_FOUND) is no error unless none had it.
  absl::Status ReleaseTensor(const std::string& tensor_id, const CallOptions& call = {});

  absl::StatusOr<v1::GetServerInfoResponse> GetServerInfo(const CallOptions& call = {});

  // grpc.health.v1.Health/Check; an empty `service` asks about the server as a
  // whole.
  absl::StatusOr<HealthStatus> CheckHealth(const std::string& service = "",
                                           const CallOptions& call = {});

  // The channel to the (first) server.
  const std::shared_ptr<grpc::Channel>& channel() const { return endpoints_->first_channel(); }

 private:
  Client(std::unique_ptr<EndpointSet> endpoints, const ClientOptions& options);
  // `call` with the client's default timeout applied, so that retries on
  // other replicas share one deadline.
  CallOptions WithDefaultDeadline(const CallOptions& call) const;
  // Runs `attempt` on the next replica and, while it fails with a status
  // worth another replica (UNAVAILABLE, CANCELLED), on the replicas after it,
  // once each. The last failure names its replica.
  absl::Status OnReplicas(absl::FunctionRef<absl::Status(const Endpoint&)> attempt);
  // One ExecuteMany stream on `endpoint`, of the requests without an answer
  // in `answers`: fills in the answers it gets (a response, or the item's
  // error) and returns the stream's status. A response that does not belong
  // to a request sent on it sets `protocol_error`.
  absl::Status ExecuteManyOnce(
      const Endpoint& endpoint, const std::vector<v1::ExecuteRequest>& requests,
      const absl::flat_hash_map<std::string, size_t>& index_of, const CallOptions& call,
      std::vector<std::optional<absl::StatusOr<v1::ExecuteResponse>>>& answers,
      absl::Status& protocol_error);
  std::unique_ptr<grpc::ClientContext> MakeContext(const CallOptions& call) const;

  std::unique_ptr<EndpointSet> endpoints_;
  ClientOptions options_;
};

}  // namespace dmlserve::client

#endif  // DMLSERVE_CLIENT_CPP_CLIENT_H_
