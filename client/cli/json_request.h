#ifndef DMLSERVE_CLIENT_CLI_JSON_REQUEST_H_
#define DMLSERVE_CLIENT_CLI_JSON_REQUEST_H_

// Request files for `dmlserve-cli run`. A file holds one of:
//  - one ExecuteRequest in the proto3 JSON mapping, tensors in the friendly
//    form of json_tensor.h;
//  - {"requests": [request, ...]}, sent together over ExecuteStream;
//  - a conformance case: {"name", "operator": "cumulative_summation",
//    "input": ..., "axis": ..., "expected": ...}, whose operator fields sit
//    beside "operator" instead of inside the oneof member;
//  - a conformance file {"cases": [case, ...]}.
// "name" becomes the request_id when none is given; "expected" is kept for
// --check; "source", "description" and "comment" are ignored. Any other
// unknown key is an error, so typos do not go unnoticed.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cli/json_tensor.h"
#include "dmlserve/v1/dmlserve.pb.h"

namespace dmlserve::client::cli {

struct FileRequest {
  v1::ExecuteRequest request;
  // The conformance case's "name", if any.
  std::string name;
  // The conformance case's expected output tensor, friendly form.
  std::optional<Json> expected;
};

struct RequestFile {
  std::vector<FileRequest> requests;
  // The file listed requests ("requests" or "cases") rather than holding one.
  bool is_list = false;
};

// One request or case; `path` prefixes error messages.
absl::StatusOr<FileRequest> ParseRequestJson(Json json, const std::string& path);

absl::StatusOr<RequestFile> ParseRequestFile(const std::string& text);

}  // namespace dmlserve::client::cli

#endif  // DMLSERVE_CLIENT_CLI_JSON_REQUEST_H_
