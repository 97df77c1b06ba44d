#ifndef DMLSERVE_CLIENT_CLI_JSON_TENSOR_H_
#define DMLSERVE_CLIENT_CLI_JSON_TENSOR_H_

// The friendly JSON form of a tensor used by request files, the conformance
// files and the CLI's output:
//   {"data_type": "FLOAT32", "sizes": [1, 1, 3, 4], "values": [2, 1, 3, ...]}
// `values` lists the elements row-major as JSON numbers; floating-point types
// also accept "NaN", "Infinity" and "-Infinity", as protobuf's JSON mapping
// writes them.

#include <string>

#include "absl/status/statusor.h"
#include "dmlserve/v1/dmlserve.pb.h"
#include "nlohmann/json.hpp"

namespace dmlserve::client::cli {

// Keys keep their insertion order so that output reads naturally.
using Json = nlohmann::ordered_json;

// Packs `values` (a JSON array) as little-endian elements of `type`. Integers
// must be whole and within the type's range; floats must not overflow it.
// Errors name the offending index.
absl::StatusOr<std::string> ValuesToData(v1::DataType type, const Json& values);

// The elements of `tensor` as a JSON array. Floats use the shortest decimal
// that reads back as the same value of their type (0.1f prints as 0.1).
absl::StatusOr<Json> DataToValues(const v1::Tensor& tensor);

// Rewrites, anywhere in `node`, each object holding "values" into the proto3
// JSON form with base64 "data", so that JsonStringToMessage can read it.
// `path` prefixes error messages ("requests[2].a.values[5]: ...").
absl::Status ExpandTensorValues(Json* node, const std::string& path);

// {"data_type", "sizes", "values"} (or {"tensor_id"}) as a Tensor.
absl::StatusOr<v1::Tensor> TensorFromJson(const Json& json);

// The friendly form of `tensor`: "values" when the data decodes, else the
// proto3 form with base64 "data"; "tensor_id" when set.
Json TensorToJson(const v1::Tensor& tensor);

}  // namespace dmlserve::client::cli

#endif  // DMLSERVE_CLIENT_CLI_JSON_TENSOR_H_
