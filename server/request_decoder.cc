#include "server/request_decoder.h"

#include <memory>
#include <string>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/core/overloaded.h"
#include "server/client_text.h"

namespace dmlserve {
namespace {

absl::Status WithFieldPrefix(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(), absl::StrCat(prefix, ".", status.message()));
}

// Proto3 enums are open: any int32 may arrive. The field is named
// `field``suffix`, joined only for an error (this runs for every tensor).
absl::StatusOr<DataType> DecodeDataType(int value, absl::string_view field,
                                        absl::string_view suffix = "") {
  if (value < 0 || value > kMaxDataTypeValue) {
    return absl::InvalidArgumentError(absl::StrCat(field, suffix, ": unknown data type ", value));
  }
  return static_cast<DataType>(value);
}

// A Tensor message with nothing set counts as absent, the same as an unset
// field, so clients that always fill optional messages are not penalized.
bool IsGiven(bool has_field, const v1::Tensor& proto) {
  return has_field && (proto.data_type() != 0 || proto.sizes_size() > 0 || !proto.data().empty() ||
                       !proto.tensor_id().empty());
}

Shape SizesOf(const v1::Tensor& proto) { return Shape(proto.sizes().begin(), proto.sizes().end()); }

absl::StatusOr<Tensor> DecodeRegisteredTensor(const v1::Tensor& proto, absl::string_view field,
                                              const TensorRegistry& registry) {
  if (!proto.data().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": set either data or tensor_id, not both"));
  }
  absl::StatusOr<Tensor> tensor = registry.Find(proto.tensor_id());
  if (!tensor.ok()) {
    // The request is what is wrong, not a resource the RPC addresses.
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".tensor_id: ", tensor.status().message()));
  }
  if (proto.data_type() != 0 && proto.data_type() != static_cast<int>(tensor->data_type)) {
    absl::StatusOr<DataType> given = DecodeDataType(proto.data_type(), field, ".data_type");
    if (!given.ok()) return given.status();
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".data_type: ", DataTypeName(*given), " does not match registered tensor ",
        QuotedClientText(proto.tensor_id()), " (", DataTypeName(tensor->data_type), ")"));
  }
  if (proto.sizes_size() > 0 && SizesOf(proto) != tensor->sizes) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".sizes: ", ShapeToString(SizesOf(proto)), " does not match registered tensor ",
        QuotedClientText(proto.tensor_id()), " (", ShapeToString(tensor->sizes), ")"));
  }
  return tensor;
}

// An input tensor of an operator: by value or by registered id; an empty
// Tensor when not given (the operation decides whether it is required).
absl::StatusOr<Tensor> DecodeInputTensor(bool has_field, v1::Tensor* proto, absl::string_view field,
                                         const TensorRegistry& registry,
                                         uint64_t max_tensor_bytes) {
  if (!IsGiven(has_field, *proto)) return Tensor();
  if (!proto->tensor_id().empty()) return DecodeRegisteredTensor(*proto, field, registry);
  return DecodeTensorData(proto, field, max_tensor_bytes);
}

absl::StatusOr<AxisDirection> DecodeAxisDirection(int value) {
  switch (value) {
    case v1::AXIS_DIRECTION_INCREASING:
      return AxisDirection::kIncreasing;
    case v1::AXIS_DIRECTION_DECREASING:
      return AxisDirection::kDecreasing;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("axis_direction: unknown value ", value,
                   ", expected AXIS_DIRECTION_INCREASING or AXIS_DIRECTION_DECREASING"));
}

template <typename ScanMessage>
absl::StatusOr<Operation> DecodeScan(OperatorKind kind, ScanMessage* message, bool exclusive,
                                     const TensorRegistry& registry, uint64_t max_tensor_bytes) {
  absl::StatusOr<Tensor> input = DecodeInputTensor(message->has_input(), message->mutable_input(),
                                                   "input", registry, max_tensor_bytes);
  if (!input.ok()) return input.status();
  absl::StatusOr<AxisDirection> direction = DecodeAxisDirection(message->axis_direction());
  if (!direction.ok()) return direction.status();
  absl::StatusOr<ScanOperation> operation =
      MakeScanOperation(kind, *std::move(input), message->axis(), *direction, exclusive);
  if (!operation.ok()) return operation.status();
  return Operation(*std::move(operation));
}

absl::StatusOr<Operation> DecodeQuantizedMatMul(v1::QuantizedLinearMatrixMultiply* message,
                                                const TensorRegistry& registry,
                                                uint64_t max_tensor_bytes) {
  QuantizedMatMulTensors tensors;
  struct Field {
    const char* name;
    bool has;
    v1::Tensor* proto;
    Tensor* tensor;
  };
  const Field fields[] = {
      {"a", message->has_a(), message->mutable_a(), &tensors.a},
      {"a_scale", message->has_a_scale(), message->mutable_a_scale(), &tensors.a_scale},
      {"a_zero_point", message->has_a_zero_point(), message->mutable_a_zero_point(),
       &tensors.a_zero_point},
      {"b", message->has_b(), message->mutable_b(), &tensors.b},
      {"b_scale", message->has_b_scale(), message->mutable_b_scale(), &tensors.b_scale},
      {"b_zero_point", message->has_b_zero_point(), message->mutable_b_zero_point(),
       &tensors.b_zero_point},
      {"output_scale", message->has_output_scale(), message->mutable_output_scale(),
       &tensors.output_scale},
      {"output_zero_point", message->has_output_zero_point(), message->mutable_output_zero_point(),
       &tensors.output_zero_point},
  };
  for (const Field& field : fields) {
    absl::StatusOr<Tensor> tensor =
        DecodeInputTensor(field.has, field.proto, field.name, registry, max_tensor_bytes);
    if (!tensor.ok()) return tensor.status();
    *field.tensor = *std::move(tensor);
  }
  absl::StatusOr<DataType> output_data_type =
      DecodeDataType(message->output_data_type(), "output_data_type");
  if (!output_data_type.ok()) return output_data_type.status();
  absl::StatusOr<QuantizedMatMulOperation> operation =
      MakeQuantizedMatMulOperation(std::move(tensors), *output_data_type);
  if (!operation.ok()) return operation.status();
  return Operation(*std::move(operation));
}

std::string OperatorChoices() {
  std::string choices;
  for (int i = 0; i < kOperatorKindCount; ++i) {
    absl::StrAppend(&choices, i == 0 ? "" : ", ", OperatorName(static_cast<OperatorKind>(i)));
  }
  return choices;
}

}  // namespace

std::optional<OperatorKind> RequestedOperator(const v1::ExecuteRequest& request) {
  switch (request.operator_case()) {
    case v1::ExecuteRequest::kCumulativeSummation:
      return OperatorKind::kCumulativeSummation;
    case v1::ExecuteRequest::kCumulativeProduct:
      return OperatorKind::kCumulativeProduct;
    case v1::ExecuteRequest::kQuantizedLinearMatrixMultiply:
      return OperatorKind::kQuantizedLinearMatrixMultiply;
    case v1::ExecuteRequest::OPERATOR_NOT_SET:
      break;
  }
  return std::nullopt;
}

absl::StatusOr<Operation> DecodeExecuteRequest(v1::ExecuteRequest* request,
                                               const TensorRegistry& registry,
                                               uint64_t max_tensor_bytes) {
  std::optional<OperatorKind> kind = RequestedOperator(*request);
  if (!kind.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("operator: required, one of ", OperatorChoices()));
  }
  absl::StatusOr<Operation> operation;
  switch (*kind) {
    case OperatorKind::kCumulativeSummation: {
      v1::CumulativeSummation* message = request->mutable_cumulative_summation();
      operation =
          DecodeScan(*kind, message, message->has_exclusive_sum(), registry, max_tensor_bytes);
      break;
    }
    case OperatorKind::kCumulativeProduct: {
      v1::CumulativeProduct* message = request->mutable_cumulative_product();
      operation =
          DecodeScan(*kind, message, message->has_exclusive_product(), registry, max_tensor_bytes);
      break;
    }
    case OperatorKind::kQuantizedLinearMatrixMultiply:
      operation = DecodeQuantizedMatMul(request->mutable_quantized_linear_matrix_multiply(),
                                        registry, max_tensor_bytes);
      break;
  }
  if (!operation.ok()) return WithFieldPrefix(operation.status(), OperatorName(*kind));
  // Small inputs can ask for a huge matmul output (M x N with K = 1, or a
  // registered B): the output is held to the same cap as any input, so one
  // request cannot exhaust the server's memory.
  // (A scan's output is its input's size, already held to it.)
  absl::Status output_fits = std::visit(
      Overloaded{
          [](const ScanOperation&) { return absl::OkStatus(); },
          [&](const QuantizedMatMulOperation& matmul) {
            const uint64_t output_bytes = OutputBytes(matmul);
            if (output_bytes <= max_tensor_bytes) return absl::OkStatus();
            return absl::ResourceExhaustedError(absl::StrCat(
                OperatorName(*kind), ".output: ", DataTypeName(matmul.output_data_type), " sizes ",
                ShapeToString(matmul.output_sizes), " need ", output_bytes,
                " bytes, over the limit of ", max_tensor_bytes, " bytes (--max_request_bytes)"));
          },
      },
      *operation);
  if (!output_fits.ok()) return output_fits;
  return operation;
}

absl::StatusOr<Tensor> DecodeTensorData(v1::Tensor* proto, absl::string_view field,
                                        uint64_t max_tensor_bytes) {
  absl::StatusOr<DataType> data_type = DecodeDataType(proto->data_type(), field, ".data_type");
  if (!data_type.ok()) return data_type.status();
  Tensor tensor;
  tensor.data_type = *data_type;
  tensor.sizes = SizesOf(*proto);
  // Adopted, not copied: the kernels read the request's bytes in place.
  tensor.bytes = Buffer::Adopt(std::move(*proto->mutable_data()));
  if (absl::Status status = ValidateTensor(tensor, field, max_tensor_bytes); !status.ok()) {
    return status;
  }
  return tensor;
}

}  // namespace dmlserve
