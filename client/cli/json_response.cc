#include "client/cli/json_response.h"

#include <utility>

#include "google/protobuf/util/json_util.h"

namespace dmlserve::client::cli {

Json MessageToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  // Printing a valid message cannot fail; an empty object is the fallback.
  if (!google::protobuf::util::MessageToJsonString(message, &text, options).ok()) {
    return Json::object();
  }
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

Json ResponseToJson(const v1::ExecuteResponse& response) {
  Json out = Json::object();
  out["request_id"] = response.request_id();
  if (response.has_output()) out["output"] = TensorToJson(response.output());
  out["info"] = MessageToJson(response.info());
  if (response.has_status() && response.status().code() != 0) {
    const absl::Status status(static_cast<absl::StatusCode>(response.status().code()),
                              response.status().message());
    out["error"] = ErrorToJson(response.request_id(), status)["error"];
  }
  return out;
}

Json ErrorToJson(const std::string& request_id, const absl::Status& status) {
  Json out = Json::object();
  out["request_id"] = request_id;
  Json error = Json::object();
  error["code"] = absl::StatusCodeToString(status.code());
  error["message"] = std::string(status.message());
  out["error"] = std::move(error);
  return out;
}

}  // namespace dmlserve::client::cli
