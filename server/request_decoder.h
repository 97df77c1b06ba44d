#ifndef DMLSERVE_SERVER_REQUEST_DECODER_H_
#define DMLSERVE_SERVER_REQUEST_DECODER_H_

// dmlserve.v1 messages to validated kernel operations.
//
// The operator rules themselves live in kernels/core/operation.cc; this layer
// resolves registered tensors, rejects what the API forbids (no operator, both
// data and tensor_id, ...) and prefixes every error with the operator's field
// name, so messages name the full field path of the request:
//   cumulative_summation.input.data: 44 bytes, expected 48 for FLOAT32 sizes [1,1,3,4]

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dmlserve/v1/dmlserve.pb.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"
#include "server/tensor_registry.h"

namespace dmlserve {

// The operator a request asks for; nullopt when none is set.
std::optional<OperatorKind> RequestedOperator(const v1::ExecuteRequest& request);

// Decodes and validates `request`. Tensor payloads are moved out of it, not
// copied. Errors are INVALID_ARGUMENT naming the field (or RESOURCE_EXHAUSTED
// for a tensor over `max_tensor_bytes`).
absl::StatusOr<Operation> DecodeExecuteRequest(v1::ExecuteRequest* request,
                                               const TensorRegistry& registry,
                                               uint64_t max_tensor_bytes);

// A tensor given by value (RegisterTensor), validated; `field` names it in
// errors. Its payload is moved out of `proto`.
absl::StatusOr<Tensor> DecodeTensorData(v1::Tensor* proto, absl::string_view field,
                                        uint64_t max_tensor_bytes);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_REQUEST_DECODER_H_
