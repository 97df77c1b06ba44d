#ifndef DMLSERVE_SERVER_STATUS_CONVERSION_H_
#define DMLSERVE_SERVER_STATUS_CONVERSION_H_

// absl::Status (used inside the server) to and from the statuses gRPC speaks.
// Both use the same canonical code numbers, so codes convert by value.

#include <grpcpp/support/status.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/rpc/status.pb.h"

namespace dmlserve {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// For ExecuteStream items, which carry their status in the response.
google::rpc::Status ToRpcStatus(const absl::Status& status);
absl::Status FromRpcStatus(const google::rpc::Status& status);

// The gRPC code name, "OK", "INVALID_ARGUMENT", ... (the `code` metric label).
absl::string_view StatusCodeName(absl::StatusCode code);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_STATUS_CONVERSION_H_
