#include "server/kserve_translation.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"

namespace dmlserve::kserve {
namespace {

// Which InferTensorContents field carries a datatype's elements.
enum class Contents { kInt, kInt64, kUint, kUint64, kFp32, kFp64, kRawOnly };

struct Datatype {
  absl::string_view name;
  v1::DataType type;
  size_t bytes;
  Contents contents;
};

// The protocol's datatypes dmlserve has; BOOL and BYTES have no dmlserve type.
constexpr Datatype kDatatypes[] = {
    {"FP32", v1::FLOAT32, 4, Contents::kFp32},    {"FP16", v1::FLOAT16, 2, Contents::kRawOnly},
    {"FP64", v1::FLOAT64, 8, Contents::kFp64},    {"UINT8", v1::UINT8, 1, Contents::kUint},
    {"UINT16", v1::UINT16, 2, Contents::kUint},   {"UINT32", v1::UINT32, 4, Contents::kUint},
    {"UINT64", v1::UINT64, 8, Contents::kUint64}, {"INT8", v1::INT8, 1, Contents::kInt},
    {"INT16", v1::INT16, 2, Contents::kInt},      {"INT32", v1::INT32, 4, Contents::kInt},
    {"INT64", v1::INT64, 8, Contents::kInt64},
};

const Datatype* FindDatatype(absl::string_view name) {
  for (const Datatype& datatype : kDatatypes) {
    if (datatype.name == name) return &datatype;
  }
  return nullptr;
}

std::string DatatypeList() {
  std::vector<absl::string_view> names;
  for (const Datatype& datatype : kDatatypes) names.push_back(datatype.name);
  return absl::StrJoin(names, ", ");
}

struct InputSpec {
  absl::string_view name;
  bool required;
  absl::string_view metadata_datatype;  // what ModelMetadata lists
};

struct Model {
  absl::string_view name;
  v1::ExecuteRequest::OperatorCase op;
  absl::Span<const InputSpec> inputs;
  absl::Span<const absl::string_view> parameters;
  absl::string_view output_datatype;  // what ModelMetadata lists
};

constexpr InputSpec kScanInputs[] = {{"input", true, "FP32"}};
constexpr InputSpec kMatMulInputs[] = {
    {"a", true, "UINT8"},
    {"a_scale", true, "FP32"},
    {"a_zero_point", false, "UINT8"},
    {"b", true, "UINT8"},
    {"b_scale", true, "FP32"},
    {"b_zero_point", false, "UINT8"},
    {"output_scale", true, "FP32"},
    {"output_zero_point", false, "UINT8"},
};
constexpr absl::string_view kScanParameters[] = {"axis", "axis_direction", "exclusive"};
constexpr absl::string_view kMatMulParameters[] = {"output_data_type"};

constexpr Model kModels[] = {
    {"cumulative_summation", v1::ExecuteRequest::kCumulativeSummation, kScanInputs, kScanParameters,
     "FP32"},
    {"cumulative_product", v1::ExecuteRequest::kCumulativeProduct, kScanInputs, kScanParameters,
     "FP32"},
    {"quantized_linear_matrix_multiply", v1::ExecuteRequest::kQuantizedLinearMatrixMultiply,
     kMatMulInputs, kMatMulParameters, "UINT8"},
};

const Model* FindModel(absl::string_view name) {
  for (const Model& model : kModels) {
    if (model.name == name) return &model;
  }
  return nullptr;
}

// Client-chosen names are quoted cut short, so an error always fits in gRPC's
// status metadata.
std::string Quoted(absl::string_view text) {
  constexpr size_t kMaxQuoted = 64;
  if (text.size() <= kMaxQuoted) return absl::StrCat("\"", text, "\"");
  return absl::StrCat("\"", text.substr(0, kMaxQuoted), "...\" (", text.size(), " bytes)");
}

std::string InputField(int index, absl::string_view name) {
  return absl::StrCat("inputs[", index, "] (", Quoted(name), ")");
}

absl::Status Invalid(absl::string_view field, absl::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", rule));
}

// The native tensor an input of `model` fills.
v1::Tensor* NativeTensor(const Model& model, absl::string_view input, v1::ExecuteRequest& out) {
  switch (model.op) {
    case v1::ExecuteRequest::kCumulativeSummation:
      return out.mutable_cumulative_summation()->mutable_input();
    case v1::ExecuteRequest::kCumulativeProduct:
      return out.mutable_cumulative_product()->mutable_input();
    case v1::ExecuteRequest::kQuantizedLinearMatrixMultiply: {
      v1::QuantizedLinearMatrixMultiply* matmul = out.mutable_quantized_linear_matrix_multiply();
      if (input == "a") return matmul->mutable_a();
      if (input == "a_scale") return matmul->mutable_a_scale();
      if (input == "a_zero_point") return matmul->mutable_a_zero_point();
      if (input == "b") return matmul->mutable_b();
      if (input == "b_scale") return matmul->mutable_b_scale();
      if (input == "b_zero_point") return matmul->mutable_b_zero_point();
      if (input == "output_scale") return matmul->mutable_output_scale();
      return matmul->mutable_output_zero_point();
    }
    case v1::ExecuteRequest::OPERATOR_NOT_SET:
      break;
  }
  return nullptr;
}

// Appends `count` typed values to `bytes` as elements of `Element`, refusing
// any value the element type cannot hold.
template <typename Element, typename Value>
absl::Status AppendElements(const google::protobuf::RepeatedField<Value>& values,
                            absl::string_view field, absl::string_view datatype,
                            std::string& bytes) {
  bytes.resize(static_cast<size_t>(values.size()) * sizeof(Element));
  char* out = bytes.data();
  for (int i = 0; i < values.size(); ++i) {
    const Value value = values[i];
    if constexpr (std::is_integral_v<Element>) {
      if (value < static_cast<Value>(std::numeric_limits<Element>::min()) ||
          value > static_cast<Value>(std::numeric_limits<Element>::max())) {
        return Invalid(absl::StrCat(field, "[", i, "]"),
                       absl::StrCat(value, " is out of range for ", datatype));
      }
    }
    const Element element = static_cast<Element>(value);
    // Elements are little-endian on the wire, as in memory on every platform
    // dmlserve builds for (x86-64, arm64).
    std::memcpy(out + static_cast<size_t>(i) * sizeof(Element), &element, sizeof(Element));
  }
  return absl::OkStatus();
}

// Fills `bytes` from the typed contents of an input of `datatype`.
absl::Status TypedBytes(const inference::InferTensorContents& contents, const Datatype& datatype,
                        absl::string_view field, uint64_t elements, std::string& bytes) {
  // The one field this datatype uses, its name, and how many values it has.
  const char* used = nullptr;
  int count = 0;
  switch (datatype.contents) {
    case Contents::kInt:
      used = "int_contents", count = contents.int_contents_size();
      break;
    case Contents::kInt64:
      used = "int64_contents", count = contents.int64_contents_size();
      break;
    case Contents::kUint:
      used = "uint_contents", count = contents.uint_contents_size();
      break;
    case Contents::kUint64:
      used = "uint64_contents", count = contents.uint64_contents_size();
      break;
    case Contents::kFp32:
      used = "fp32_contents", count = contents.fp32_contents_size();
      break;
    case Contents::kFp64:
      used = "fp64_contents", count = contents.fp64_contents_size();
      break;
    case Contents::kRawOnly:
      return Invalid(field, absl::StrCat(datatype.name,
                                         " travels in raw_input_contents only (the protocol has "
                                         "no typed field for it)"));
  }
  const int others = contents.bool_contents_size() + contents.int_contents_size() +
                     contents.int64_contents_size() + contents.uint_contents_size() +
                     contents.uint64_contents_size() + contents.fp32_contents_size() +
                     contents.fp64_contents_size() + contents.bytes_contents_size() - count;
  if (others > 0) {
    return Invalid(field, absl::StrCat(datatype.name, " elements go in ", used,
                                       " only; other fields of contents are set"));
  }
  const std::string values_field = absl::StrCat(field, ".", used);
  if (static_cast<uint64_t>(count) != elements) {
    return Invalid(values_field,
                   absl::StrCat(count, " values, expected ", elements, " (the shape's elements)"));
  }
  switch (datatype.type) {
    case v1::FLOAT32:
      return AppendElements<float>(contents.fp32_contents(), values_field, datatype.name, bytes);
    case v1::FLOAT64:
      return AppendElements<double>(contents.fp64_contents(), values_field, datatype.name, bytes);
    case v1::UINT8:
      return AppendElements<uint8_t>(contents.uint_contents(), values_field, datatype.name, bytes);
    case v1::UINT16:
      return AppendElements<uint16_t>(contents.uint_contents(), values_field, datatype.name, bytes);
    case v1::UINT32:
      return AppendElements<uint32_t>(contents.uint_contents(), values_field, datatype.name, bytes);
    case v1::UINT64:
      return AppendElements<uint64_t>(contents.uint64_contents(), values_field, datatype.name,
                                      bytes);
    case v1::INT8:
      return AppendElements<int8_t>(contents.int_contents(), values_field, datatype.name, bytes);
    case v1::INT16:
      return AppendElements<int16_t>(contents.int_contents(), values_field, datatype.name, bytes);
    case v1::INT32:
      return AppendElements<int32_t>(contents.int_contents(), values_field, datatype.name, bytes);
    case v1::INT64:
      return AppendElements<int64_t>(contents.int64_contents(), values_field, datatype.name, bytes);
    default:
      break;
  }
  return Invalid(field, absl::StrCat(datatype.name, " has no typed contents"));
}

// One input into its native tensor. `raw` is its raw_input_contents entry, or
// null when the request sends typed contents.
absl::Status ToTensor(int index, inference::ModelInferRequest::InferInputTensor& input,
                      std::string* raw, v1::Tensor& tensor) {
  const std::string field = InputField(index, input.name());
  for (const auto& [key, parameter] : input.parameters()) {
    if (key != "tensor_id") {
      return Invalid(absl::StrCat(field, ".parameters[", Quoted(key), "]"),
                     "unknown input parameter (accepted: tensor_id)");
    }
    if (parameter.parameter_choice_case() != inference::InferParameter::kStringParam) {
      return Invalid(absl::StrCat(field, ".parameters[\"tensor_id\"]"), "must be a string_param");
    }
    tensor.set_tensor_id(parameter.string_param());
  }
  const bool registered = !tensor.tensor_id().empty();

  const Datatype* datatype = nullptr;
  if (!input.datatype().empty() || !registered) {
    datatype = FindDatatype(input.datatype());
    if (datatype == nullptr) {
      return Invalid(
          absl::StrCat(field, ".datatype"),
          absl::StrCat(Quoted(input.datatype()),
                       " is not a datatype dmlserve has (it has: ", DatatypeList(), ")"));
    }
    tensor.set_data_type(datatype->type);
  }
  // The element count, saturated: a shape too large to hold never matches
  // the data it comes with.
  uint64_t elements = 1;
  for (int d = 0; d < input.shape_size(); ++d) {
    const int64_t size = input.shape(d);
    if (size < 0 || size > std::numeric_limits<uint32_t>::max()) {
      return Invalid(absl::StrCat(field, ".shape[", d, "]"),
                     absl::StrCat(size, " is not a size (0 to 4294967295)"));
    }
    tensor.add_sizes(static_cast<uint32_t>(size));
    elements = __builtin_mul_overflow(elements, static_cast<uint64_t>(size), &elements)
                   ? std::numeric_limits<uint64_t>::max()
                   : elements;
  }

  if (registered) {
    if ((raw != nullptr && !raw->empty()) || input.has_contents()) {
      return Invalid(field,
                     "names a registered tensor (parameters[\"tensor_id\"]) and also carries data");
    }
    return absl::OkStatus();
  }
  if (raw != nullptr) {
    if (input.has_contents()) {
      return Invalid(absl::StrCat(field, ".contents"),
                     "set while the request carries raw_input_contents (use one or the other)");
    }
    // Moved: the native decoder checks its size against the shape.
    tensor.mutable_data()->swap(*raw);
    return absl::OkStatus();
  }
  if (!input.has_contents()) {
    return Invalid(field, "no data: neither contents nor raw_input_contents");
  }
  return TypedBytes(input.contents(), *datatype, absl::StrCat(field, ".contents"), elements,
                    *tensor.mutable_data());
}

// Checks that `parameter` holds the `wanted` choice, named `wanted_name`.
absl::Status ExpectChoice(absl::string_view field, const inference::InferParameter& parameter,
                          inference::InferParameter::ParameterChoiceCase wanted,
                          absl::string_view wanted_name) {
  return parameter.parameter_choice_case() == wanted
             ? absl::OkStatus()
             : Invalid(field, absl::StrCat("must be a ", wanted_name));
}

absl::Status UnknownParameter(absl::string_view field, const Model& model) {
  return Invalid(field, absl::StrCat("unknown parameter of model ", model.name,
                                     " (accepted: ", absl::StrJoin(model.parameters, ", "), ")"));
}

// A scan's parameters, into its message (CumulativeSummation or
// CumulativeProduct, whose exclusive flags are named apart).
template <typename ScanMessage>
absl::Status ApplyScanParameter(const Model& model, absl::string_view field, const std::string& key,
                                const inference::InferParameter& parameter, ScanMessage& scan,
                                void (ScanMessage::*set_exclusive)(bool)) {
  if (key == "axis") {
    if (absl::Status status =
            ExpectChoice(field, parameter, inference::InferParameter::kInt64Param, "int64_param");
        !status.ok()) {
      return status;
    }
    const int64_t axis = parameter.int64_param();
    if (axis < 0 || axis > std::numeric_limits<uint32_t>::max()) {
      return Invalid(field, absl::StrCat(axis, " is not an axis (0 up to the input's rank - 1)"));
    }
    scan.set_axis(static_cast<uint32_t>(axis));
    return absl::OkStatus();
  }
  if (key == "axis_direction") {
    if (absl::Status status =
            ExpectChoice(field, parameter, inference::InferParameter::kStringParam, "string_param");
        !status.ok()) {
      return status;
    }
    if (parameter.string_param() == "INCREASING") {
      scan.set_axis_direction(v1::AXIS_DIRECTION_INCREASING);
    } else if (parameter.string_param() == "DECREASING") {
      scan.set_axis_direction(v1::AXIS_DIRECTION_DECREASING);
    } else {
      return Invalid(field, absl::StrCat(Quoted(parameter.string_param()),
                                         " is not a direction (INCREASING or DECREASING)"));
    }
    return absl::OkStatus();
  }
  if (key == "exclusive") {
    if (absl::Status status =
            ExpectChoice(field, parameter, inference::InferParameter::kBoolParam, "bool_param");
        !status.ok()) {
      return status;
    }
    (scan.*set_exclusive)(parameter.bool_param());
    return absl::OkStatus();
  }
  return UnknownParameter(field, model);
}

absl::Status ApplyMatMulParameter(const Model& model, absl::string_view field,
                                  const std::string& key,
                                  const inference::InferParameter& parameter,
                                  v1::QuantizedLinearMatrixMultiply& matmul) {
  if (key != "output_data_type") return UnknownParameter(field, model);
  if (absl::Status status =
          ExpectChoice(field, parameter, inference::InferParameter::kStringParam, "string_param");
      !status.ok()) {
    return status;
  }
  const Datatype* datatype = FindDatatype(parameter.string_param());
  if (datatype == nullptr) {
    return Invalid(field,
                   absl::StrCat(Quoted(parameter.string_param()),
                                " is not a datatype dmlserve has (it has: ", DatatypeList(), ")"));
  }
  matmul.set_output_data_type(datatype->type);
  return absl::OkStatus();
}

absl::Status ApplyParameter(const Model& model, const std::string& key,
                            const inference::InferParameter& parameter, v1::ExecuteRequest& out) {
  const std::string field = absl::StrCat("parameters[", Quoted(key), "]");
  switch (model.op) {
    case v1::ExecuteRequest::kCumulativeSummation:
      return ApplyScanParameter(model, field, key, parameter, *out.mutable_cumulative_summation(),
                                &v1::CumulativeSummation::set_has_exclusive_sum);
    case v1::ExecuteRequest::kCumulativeProduct:
      return ApplyScanParameter(model, field, key, parameter, *out.mutable_cumulative_product(),
                                &v1::CumulativeProduct::set_has_exclusive_product);
    case v1::ExecuteRequest::kQuantizedLinearMatrixMultiply:
      return ApplyMatMulParameter(model, field, key, parameter,
                                  *out.mutable_quantized_linear_matrix_multiply());
    case v1::ExecuteRequest::OPERATOR_NOT_SET:
      break;
  }
  return UnknownParameter(field, model);
}

}  // namespace

absl::Status CheckModel(absl::string_view name, absl::string_view version) {
  if (FindModel(name) == nullptr) {
    std::vector<absl::string_view> names;
    for (const Model& model : kModels) names.push_back(model.name);
    return absl::NotFoundError(absl::StrCat(
        "model ", Quoted(name), " is not served here (models: ", absl::StrJoin(names, ", "), ")"));
  }
  if (!version.empty() && version != kModelVersion) {
    return absl::NotFoundError(absl::StrCat("model ", name, " has no version ", Quoted(version),
                                            " (versions: ", kModelVersion, ")"));
  }
  return absl::OkStatus();
}

inference::ModelMetadataResponse ModelMetadata(absl::string_view name) {
  inference::ModelMetadataResponse metadata;
  const Model* model = FindModel(name);
  if (model == nullptr) return metadata;
  metadata.set_name(std::string(model->name));
  metadata.add_versions(std::string(kModelVersion));
  metadata.set_platform(std::string(kPlatform));
  for (const InputSpec& spec : model->inputs) {
    inference::ModelMetadataResponse::TensorMetadata* input = metadata.add_inputs();
    input->set_name(std::string(spec.name));
    input->set_datatype(std::string(spec.metadata_datatype));
    input->add_shape(-1);
  }
  inference::ModelMetadataResponse::TensorMetadata* output = metadata.add_outputs();
  output->set_name("output");
  output->set_datatype(std::string(model->output_datatype));
  output->add_shape(-1);
  return metadata;
}

absl::StatusOr<v1::ExecuteRequest> ToExecuteRequest(inference::ModelInferRequest* request) {
  if (absl::Status status = CheckModel(request->model_name(), request->model_version());
      !status.ok()) {
    return status;
  }
  const Model& model = *FindModel(request->model_name());
  v1::ExecuteRequest out;
  out.set_request_id(request->id());
  // Selects the operator even when every attribute keeps its default.
  NativeTensor(model, model.inputs.front().name, out);

  for (int i = 0; i < request->outputs_size(); ++i) {
    if (request->outputs(i).name() != "output") {
      return Invalid(absl::StrCat("outputs[", i, "] (", Quoted(request->outputs(i).name()), ")"),
                     absl::StrCat("model ", model.name, " has one output, \"output\""));
    }
  }
  const bool raw = request->raw_input_contents_size() > 0;
  if (raw && request->raw_input_contents_size() != request->inputs_size()) {
    return Invalid("raw_input_contents",
                   absl::StrCat(request->raw_input_contents_size(), " entries for ",
                                request->inputs_size(), " inputs (one per input, in order)"));
  }
  std::vector<bool> given(model.inputs.size(), false);
  for (int i = 0; i < request->inputs_size(); ++i) {
    inference::ModelInferRequest::InferInputTensor& input = *request->mutable_inputs(i);
    size_t spec = 0;
    while (spec < model.inputs.size() && model.inputs[spec].name != input.name()) ++spec;
    if (spec == model.inputs.size()) {
      std::vector<absl::string_view> names;
      for (const InputSpec& known : model.inputs) names.push_back(known.name);
      return Invalid(InputField(i, input.name()),
                     absl::StrCat("not an input of model ", model.name,
                                  " (its inputs: ", absl::StrJoin(names, ", "), ")"));
    }
    if (given[spec]) return Invalid(InputField(i, input.name()), "given twice");
    given[spec] = true;
    if (absl::Status status =
            ToTensor(i, input, raw ? request->mutable_raw_input_contents(i) : nullptr,
                     *NativeTensor(model, input.name(), out));
        !status.ok()) {
      return status;
    }
  }
  for (size_t spec = 0; spec < model.inputs.size(); ++spec) {
    if (model.inputs[spec].required && !given[spec]) {
      return Invalid("inputs", absl::StrCat("model ", model.name, " needs an input named \"",
                                            model.inputs[spec].name, "\""));
    }
  }
  for (const auto& [key, parameter] : request->parameters()) {
    if (absl::Status status = ApplyParameter(model, key, parameter, out); !status.ok()) {
      return status;
    }
  }
  return out;
}

inference::ModelInferResponse ToModelInferResponse(absl::string_view model_name,
                                                   v1::ExecuteResponse* response) {
  inference::ModelInferResponse out;
  out.set_model_name(std::string(model_name));
  out.set_model_version(std::string(kModelVersion));
  out.set_id(response->request_id());
  v1::Tensor* tensor = response->mutable_output();
  inference::ModelInferResponse::InferOutputTensor* output = out.add_outputs();
  output->set_name("output");
  output->set_datatype(std::string(DatatypeName(tensor->data_type())));
  for (const uint32_t size : tensor->sizes()) output->add_shape(size);
  out.add_raw_output_contents()->swap(*tensor->mutable_data());
  return out;
}

absl::string_view DatatypeName(v1::DataType type) {
  for (const Datatype& datatype : kDatatypes) {
    if (datatype.type == type) return datatype.name;
  }
  return "";
}

}  // namespace dmlserve::kserve
