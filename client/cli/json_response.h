#ifndef DMLSERVE_CLIENT_CLI_JSON_RESPONSE_H_
#define DMLSERVE_CLIENT_CLI_JSON_RESPONSE_H_

// What the CLI prints: responses in the proto3 JSON mapping (snake_case field
// names, every scalar field shown), except that output tensors use the
// friendly {"data_type", "sizes", "values"} form of json_tensor.h.

#include <string>

#include "absl/status/status.h"
#include "client/cli/json_tensor.h"
#include "dmlserve/v1/dmlserve.pb.h"
#include "google/protobuf/message.h"

namespace dmlserve::client::cli {

Json MessageToJson(const google::protobuf::Message& message);

// {"request_id", "output": {friendly tensor}, "info": {...}} plus "status"
// when the response carries a failed one.
Json ResponseToJson(const v1::ExecuteResponse& response);

// {"request_id", "error": {"code": "INVALID_ARGUMENT", "message": ...}}.
Json ErrorToJson(const std::string& request_id, const absl::Status& status);

}  // namespace dmlserve::client::cli

#endif  // DMLSERVE_CLIENT_CLI_JSON_RESPONSE_H_
