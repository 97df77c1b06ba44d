#ifndef DMLSERVE_SERVER_KSERVE_TRANSLATION_H_
#define DMLSERVE_SERVER_KSERVE_TRANSLATION_H_

// The KServe v2 protocol's messages to and from dmlserve.v1's: one model per
// operator, so that a KServe client runs the same operators through the same
// executor (validation, scheduler, batching, limits, metrics) as the native
// API. The mapping, which docs/kserve.md documents for users:
//
//   model                              inputs (by name; any order)
//   cumulative_summation               input
//   cumulative_product                 input
//   quantized_linear_matrix_multiply   a, a_scale, a_zero_point (optional), b,
//                                      b_scale, b_zero_point (optional),
//                                      output_scale, output_zero_point (optional)
//
// Every model has one output, "output". Operator attributes are request
// parameters: axis (int64), axis_direction ("INCREASING" | "DECREASING") and
// exclusive (bool) for the scans, output_data_type (a datatype name) for the
// matrix multiply. An input whose parameter tensor_id (string) is set names a
// registered tensor instead of carrying data.
//
// Inputs carry raw_input_contents (moved, not copied) or typed contents
// (converted, range-checked); outputs are always raw_output_contents. Errors
// are INVALID_ARGUMENT naming the protocol's field (inputs[1] ("b").shape[0]:
// ...), NOT_FOUND for an unknown model or version; what the native decoder
// then refuses keeps its own field path (quantized_linear_matrix_multiply.b_scale...).

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dmlserve/v1/dmlserve.pb.h"
#include "inference/grpc_predict_v2.pb.h"

namespace dmlserve::kserve {

// The only model version; "" also selects it.
inline constexpr absl::string_view kModelVersion = "1";
// ModelMetadataResponse.platform.
inline constexpr absl::string_view kPlatform = "dmlserve";

// OK when `name` (and `version`, "" or kModelVersion) is a model this server
// has; NOT_FOUND naming the models (or versions) otherwise.
absl::Status CheckModel(absl::string_view name, absl::string_view version);

// The metadata of a model CheckModel accepts. An input whose datatype varies
// with the request (a scan takes several) lists the first it supports; shapes
// are [-1] (any rank, any sizes).
inference::ModelMetadataResponse ModelMetadata(absl::string_view name);

// The native request for `request`, whose raw contents are moved out of it.
absl::StatusOr<v1::ExecuteRequest> ToExecuteRequest(inference::ModelInferRequest* request);

// The protocol's response for a native one that succeeded: its output moves
// into raw_output_contents.
inference::ModelInferResponse ToModelInferResponse(absl::string_view model_name,
                                                   v1::ExecuteResponse* response);

// The protocol's datatype name of a dmlserve data type ("FP32", "UINT8", ...).
absl::string_view DatatypeName(v1::DataType type);

}  // namespace dmlserve::kserve

#endif  // DMLSERVE_SERVER_KSERVE_TRANSLATION_H_
