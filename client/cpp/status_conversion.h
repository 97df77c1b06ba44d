#ifndef DMLSERVE_CLIENT_CPP_STATUS_CONVERSION_H_
#define DMLSERVE_CLIENT_CPP_STATUS_CONVERSION_H_

#include "absl/status/status.h"
#include "google/rpc/status.pb.h"
#include "grpcpp/support/status.h"

namespace dmlserve::client {

// gRPC and Abseil share the canonical code numbering, so codes carry over
// unchanged and the server's message is kept verbatim.
absl::Status FromGrpcStatus(const grpc::Status& status);

// The per-item status of an ExecuteStream response.
absl::Status FromRpcStatus(const google::rpc::Status& status);

}  // namespace dmlserve::client

#endif  // DMLSERVE_CLIENT_CPP_STATUS_CONVERSION_H_
