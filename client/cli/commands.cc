#include "client/cli/commands.h"

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/cli/expected_check.h"
#include "client/cli/json_pretty_print.h"
#include "client/cli/json_request.h"
#include "client/cli/json_response.h"
#include "client/cli/json_tensor.h"
#include "client/cli/number_list.h"
#include "client/cpp/client.h"
#include "client/cpp/tensor_codec.h"
#include "client/cpp/tls_credentials.h"

namespace dmlserve::client::cli {
namespace {

int ReportError(const absl::Status& status, absl::string_view context = "") {
  std::cerr << "dmlserve-cli: " << (context.empty() ? "" : absl::StrCat(context, ": "))
            << absl::StatusCodeToString(status.code()) << ": " << status.message() << "\n";
  return ExitCodeFor(status.code());
}

void Print(const Json& json, const CliSettings& settings) {
  std::cout << (settings.pretty ? PrettyPrint(json) : json.dump()) << "\n";
}

CallOptions Call(const CliSettings& settings) {
  if (settings.deadline_ms <= 0) return CallOptions();
  return CallOptions::WithTimeout(absl::Milliseconds(settings.deadline_ms));
}

absl::StatusOr<std::unique_ptr<Client>> ConnectTo(const CliSettings& settings) {
  ClientOptions options;
  if (!settings.tls_ca_file.empty() || !settings.tls_cert_file.empty() ||
      !settings.tls_key_file.empty()) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = TlsCredentialsFromFiles(
        settings.tls_ca_file, settings.tls_cert_file, settings.tls_key_file);
    if (!credentials.ok()) {
      return absl::Status(credentials.status().code(),
                          absl::StrCat("--tls_*_file: ", credentials.status().message()));
    }
    options.credentials = *std::move(credentials);
  }
  return Client::Connect(settings.server, options);
}

absl::Status Missing(absl::string_view flag, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " is required ", why));
}

// A tensor from --<prefix>dtype/sizes/values, or a reference from --<prefix>id.
absl::StatusOr<v1::Tensor> TensorFromFlags(absl::string_view prefix, const std::string& dtype,
                                           const std::string& sizes, const std::string& values,
                                           const std::string& id) {
  if (!id.empty()) {
    if (!values.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("give --", prefix, "id or --", prefix, "values, not both"));
    }
    return MakeTensorReference(id);
  }
  if (values.empty()) {
    return Missing(absl::StrCat(prefix, "values"), absl::StrCat("(or --", prefix, "id)"));
  }
  absl::StatusOr<v1::DataType> type = ParseDataType(dtype);
  if (!type.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("--", prefix, "dtype: ", type.status().message()));
  absl::StatusOr<Json> numbers = ParseNumberList(values);
  if (!numbers.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", prefix, "values: ", numbers.status().message()));
  }
  absl::StatusOr<std::string> data = ValuesToData(*type, *numbers);
  if (!data.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", prefix, "values", data.status().message()));
  }
  absl::StatusOr<std::vector<uint32_t>> dims =
      sizes.empty() ? std::vector<uint32_t>{static_cast<uint32_t>(numbers->size())}
                    : ParseSizes(sizes);
  if (!dims.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", prefix, "sizes: ", dims.status().message()));
  }
  v1::Tensor tensor;
  tensor.set_data_type(*type);
  tensor.mutable_sizes()->Add(dims->begin(), dims->end());
  tensor.set_data(*std::move(data));
  return tensor;
}

// A scale or zero point: one value per tensor ({1,1,1,1}) or one per row
// ({1,1,n,1}) / column ({1,1,1,n}) when several are given.
enum class Granularity { kPerRow, kPerColumn };

absl::StatusOr<v1::Tensor> QuantizationTensor(absl::string_view flag, const std::string& values,
                                              const std::string& dtype, Granularity granularity) {
  absl::StatusOr<v1::Tensor> tensor = TensorFromFlags(flag, dtype, "", values, "");
  if (!tensor.ok()) return tensor.status();
  const uint32_t count = tensor->sizes(0);
  tensor->clear_sizes();
  const bool per_row = granularity == Granularity::kPerRow && count > 1;
  const bool per_column = granularity == Granularity::kPerColumn && count > 1;
  for (uint32_t size : {1u, 1u, per_row ? count : 1u, per_column ? count : 1u}) {
    tensor->add_sizes(size);
  }
  return tensor;
}

int PrintResponse(const absl::StatusOr<v1::ExecuteResponse>& response,
                  const CliSettings& settings) {
  if (!response.ok()) return ReportError(response.status());
  Print(ResponseToJson(*response), settings);
  return 0;
}

int RunScan(bool product, const CliSettings& settings) {
  absl::StatusOr<v1::Tensor> input =
      TensorFromFlags("", settings.dtype, settings.sizes, settings.values, settings.id);
  if (!input.ok()) return ReportError(input.status());
  ScanOptions scan;
  scan.axis = settings.axis;
  scan.reverse = settings.reverse;
  scan.exclusive = settings.exclusive;
  v1::ExecuteRequest request =
      product ? CumulativeProductRequest(*input, scan) : CumulativeSummationRequest(*input, scan);
  request.set_request_id(settings.request_id);
  absl::StatusOr<std::unique_ptr<Client>> client = ConnectTo(settings);
  if (!client.ok()) return ReportError(client.status());
  return PrintResponse((*client)->Execute(request, Call(settings)), settings);
}

absl::StatusOr<v1::ExecuteRequest> QuantizedMatMulFromFlags(const CliSettings& s) {
  QuantizedMatMulInputs inputs;
  absl::StatusOr<v1::Tensor> a = TensorFromFlags("a_", s.a_dtype, s.a_sizes, s.a_values, s.a_id);
  if (!a.ok()) return a.status();
  inputs.a = *std::move(a);
  absl::StatusOr<v1::Tensor> b = TensorFromFlags("b_", s.b_dtype, s.b_sizes, s.b_values, s.b_id);
  if (!b.ok()) return b.status();
  inputs.b = *std::move(b);

  struct Quantization {
    absl::string_view scale_flag;
    const std::string& scale;
    absl::string_view zero_point_flag;
    const std::string& zero_point;
    const std::string& zero_point_dtype;
    Granularity granularity;
    v1::Tensor* scale_out;
    std::optional<v1::Tensor>* zero_point_out;
  };
  for (const Quantization& q : {
           Quantization{"a_scale", s.a_scale, "a_zero_point", s.a_zero_point, s.a_dtype,
                        Granularity::kPerRow, &inputs.a_scale, &inputs.a_zero_point},
           Quantization{"b_scale", s.b_scale, "b_zero_point", s.b_zero_point, s.b_dtype,
                        Granularity::kPerColumn, &inputs.b_scale, &inputs.b_zero_point},
           Quantization{"output_scale", s.output_scale, "output_zero_point", s.output_zero_point,
                        s.output_dtype, Granularity::kPerRow, &inputs.output_scale,
                        &inputs.output_zero_point},
       }) {
    if (q.scale.empty()) return Missing(q.scale_flag, "(one value, or one per row/column)");
    absl::StatusOr<v1::Tensor> scale =
        QuantizationTensor(q.scale_flag, q.scale, "FLOAT32", q.granularity);
    if (!scale.ok()) return scale.status();
    *q.scale_out = *std::move(scale);
    if (!q.zero_point.empty()) {
      absl::StatusOr<v1::Tensor> zero_point =
          QuantizationTensor(q.zero_point_flag, q.zero_point, q.zero_point_dtype, q.granularity);
      if (!zero_point.ok()) return zero_point.status();
      *q.zero_point_out = *std::move(zero_point);
    }
  }
  if (!inputs.output_zero_point) {
    absl::StatusOr<v1::DataType> type = ParseDataType(s.output_dtype);
    if (!type.ok())
      return absl::InvalidArgumentError(absl::StrCat("--output_dtype: ", type.status().message()));
    inputs.output_data_type = *type;
  }
  v1::ExecuteRequest request = QuantizedLinearMatrixMultiplyRequest(inputs);
  request.set_request_id(s.request_id);
  return request;
}

int RunQuantizedMatMul(const CliSettings& settings) {
  absl::StatusOr<v1::ExecuteRequest> request = QuantizedMatMulFromFlags(settings);
  if (!request.ok()) return ReportError(request.status());
  absl::StatusOr<std::unique_ptr<Client>> client = ConnectTo(settings);
  if (!client.ok()) return ReportError(client.status());
  return PrintResponse((*client)->Execute(*request, Call(settings)), settings);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// Adds "check" to a printed response; false when the output differs.
bool AddCheck(const FileRequest& request, const v1::ExecuteResponse& response, Json* printed) {
  if (!request.expected) {
    (*printed)["check"] = "no expected output";
    return true;
  }
  absl::Status check = CheckAgainstExpected(response.output(), *request.expected);
  (*printed)["check"] = check.ok() ? std::string("PASS") : absl::StrCat("FAIL: ", check.message());
  return check.ok();
}

int RunFile(const std::vector<std::string>& args, const CliSettings& settings) {
  std::string path = settings.file;
  if (path.empty() && !args.empty()) path = args[0];
  if (path.empty() || args.size() > 1) {
    return ReportError(absl::InvalidArgumentError("usage: dmlserve-cli run FILE.json"));
  }
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return ReportError(text.status());
  absl::StatusOr<RequestFile> file = ParseRequestFile(*text);
  if (!file.ok()) return ReportError(file.status(), path);

  if (!settings.case_name.empty()) {
    std::vector<FileRequest> picked;
    std::vector<std::string> names;
    for (FileRequest& request : file->requests) {
      names.push_back(request.name.empty() ? request.request.request_id() : request.name);
      if (names.back() == settings.case_name) picked.push_back(std::move(request));
    }
    if (picked.empty()) {
      return ReportError(
          absl::NotFoundError(absl::StrCat("no case named \"", settings.case_name,
                                           "\"; the file has: ", absl::StrJoin(names, ", "))),
          path);
    }
    file->requests = std::move(picked);
    file->is_list = file->requests.size() > 1;
  }

  absl::StatusOr<std::unique_ptr<Client>> client = ConnectTo(settings);
  if (!client.ok()) return ReportError(client.status());

  if (!file->is_list && !settings.stream) {
    const FileRequest& request = file->requests[0];
    absl::StatusOr<v1::ExecuteResponse> response =
        (*client)->Execute(request.request, Call(settings));
    if (!response.ok()) return ReportError(response.status());
    Json printed = ResponseToJson(*response);
    const bool passed = !settings.check || AddCheck(request, *response, &printed);
    Print(printed, settings);
    return passed ? 0 : kCheckFailedExitCode;
  }

  std::vector<v1::ExecuteRequest> requests;
  for (const FileRequest& request : file->requests) {
    requests.push_back(request.request);
    if (requests.back().request_id().empty()) {
      requests.back().set_request_id(absl::StrCat("request-", requests.size() - 1));
    }
  }
  absl::StatusOr<std::vector<absl::StatusOr<v1::ExecuteResponse>>> responses =
      (*client)->ExecuteMany(requests, Call(settings));
  if (!responses.ok()) return ReportError(responses.status());
  Json printed = Json::object();
  printed["responses"] = Json::array();
  int exit_code = 0;
  for (size_t i = 0; i < responses->size(); ++i) {
    const absl::StatusOr<v1::ExecuteResponse>& response = (*responses)[i];
    const std::string& request_id = requests[i].request_id();
    if (!response.ok()) {
      const int code = ReportError(response.status(), request_id);
      if (exit_code == 0) exit_code = code;
      printed["responses"].push_back(ErrorToJson(request_id, response.status()));
      continue;
    }
    Json item = ResponseToJson(*response);
    if (settings.check && !AddCheck(file->requests[i], *response, &item) && exit_code == 0) {
      exit_code = kCheckFailedExitCode;
    }
    printed["responses"].push_back(std::move(item));
  }
  Print(printed, settings);
  return exit_code;
}

int RunRegister(const CliSettings& settings) {
  absl::StatusOr<v1::Tensor> tensor;
  if (!settings.file.empty()) {
    absl::StatusOr<std::string> text = ReadFile(settings.file);
    if (!text.ok()) return ReportError(text.status());
    Json json = Json::parse(*text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
    if (json.is_discarded()) {
      return ReportError(absl::InvalidArgumentError("the file is not valid JSON"), settings.file);
    }
    tensor = TensorFromJson(json);
    if (!tensor.ok()) return ReportError(tensor.status(), settings.file);
  } else {
    tensor = TensorFromFlags("", settings.dtype, settings.sizes, settings.values, "");
    if (!tensor.ok()) return ReportError(tensor.status());
  }
  absl::StatusOr<std::unique_ptr<Client>> client = ConnectTo(settings);
  if (!client.ok()) return ReportError(client.status());
  absl::StatusOr<v1::RegisterTensorResponse> response =
      (*client)->RegisterTensor(*tensor, settings.id, Call(settings));
  if (!response.ok()) return ReportError(response.status());
  Print(MessageToJson(*response), settings);
  return 0;
}

int RunRelease(const CliSettings& settings) {
  if (settings.id.empty()) return ReportError(Missing("id", "(the tensor_id to release)"));
  absl::StatusOr<std::unique_ptr<Client>> client = ConnectTo(settings);
  if (!client.ok()) return ReportError(client.status());
  absl::Status status = (*client)->ReleaseTensor(settings.id, Call(settings));
  if (!status.ok()) return ReportError(status);
  Json printed = Json::object();
  printed["released"] = settings.id;
  Print(printed, settings);
  return 0;
}

int RunInfo(const CliSettings& settings) {
  absl::StatusOr<std::unique_ptr<Client>> client = ConnectTo(settings);
  if (!client.ok()) return ReportError(client.status());
  absl::StatusOr<v1::GetServerInfoResponse> info = (*client)->GetServerInfo(Call(settings));
  if (!info.ok()) return ReportError(info.status());
  Print(MessageToJson(*info), settings);
  return 0;
}

int RunHealth(const CliSettings& settings) {
  absl::StatusOr<std::unique_ptr<Client>> client = ConnectTo(settings);
  if (!client.ok()) return ReportError(client.status());
  absl::StatusOr<HealthStatus> health = (*client)->CheckHealth(settings.service, Call(settings));
  if (!health.ok()) return ReportError(health.status());
  std::cout << HealthStatusName(*health) << "\n";
  return *health == HealthStatus::kServing ? 0 : 1;
}

}  // namespace

int ExitCodeFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 0;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
      return 2;
    default:
      return 1;
  }
}

int RunSubcommand(const std::string& name, const std::vector<std::string>& args,
                  const CliSettings& settings) {
  if (name != "run" && !args.empty()) {
    return ReportError(absl::InvalidArgumentError(
        absl::StrCat("unexpected argument \"", args[0], "\" for ", name)));
  }
  if (name == "cumsum") return RunScan(/*product=*/false, settings);
  if (name == "cumprod") return RunScan(/*product=*/true, settings);
  if (name == "qmatmul") return RunQuantizedMatMul(settings);
  if (name == "run") return RunFile(args, settings);
  if (name == "register") return RunRegister(settings);
  if (name == "release") return RunRelease(settings);
  if (name == "info") return RunInfo(settings);
  if (name == "health") return RunHealth(settings);
  return ReportError(absl::InvalidArgumentError(absl::StrCat(
      "unknown subcommand \"", name,
      "\" (cumsum, cumprod, qmatmul, run, register, release, info, health; see --help)")));
}

}  // namespace dmlserve::client::cli
