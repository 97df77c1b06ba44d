#include "client/cli/json_request.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace dmlserve::client::cli {
namespace {

constexpr const char* kOperators[] = {"cumulative_summation", "cumulative_product",
                                      "quantized_linear_matrix_multiply"};

bool IsOperatorName(const std::string& name) {
  for (const char* op : kOperators) {
    if (name == op) return true;
  }
  return false;
}

std::string Prefixed(const std::string& path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

}  // namespace

absl::StatusOr<FileRequest> ParseRequestJson(Json json, const std::string& path) {
  const std::string where = path.empty() ? "request" : path;
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": expected a JSON object"));
  }
  FileRequest out;
  if (auto it = json.find("name"); it != json.end()) {
    if (!it->is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Prefixed(path, "name"), ": expected a string"));
    }
    out.name = it->get<std::string>();
  }
  if (auto it = json.find("expected"); it != json.end()) out.expected = *it;
  for (const char* ignored : {"name", "expected", "source", "description", "comment"}) {
    json.erase(ignored);
  }

  if (auto it = json.find("operator"); it != json.end()) {
    if (!it->is_string() || !IsOperatorName(it->get<std::string>())) {
      return absl::InvalidArgumentError(
          absl::StrCat(Prefixed(path, "operator"), ": ", it->dump(),
                       " is not one of cumulative_summation, cumulative_product, "
                       "quantized_linear_matrix_multiply"));
    }
    const std::string op = it->get<std::string>();
    json.erase("operator");
    if (json.contains(op)) {
      return absl::InvalidArgumentError(
          absl::StrCat(Prefixed(path, "operator"), ": both \"operator\" and \"", op, "\" given"));
    }
    Json fields = Json::object();
    for (auto& [key, value] : json.items()) {
      if (key != "request_id") fields[key] = value;
    }
    Json request = Json::object();
    if (json.contains("request_id")) request["request_id"] = json["request_id"];
    request[op] = std::move(fields);
    json = std::move(request);
  }

  absl::Status expanded = ExpandTensorValues(&json, path);
  if (!expanded.ok()) return expanded;

  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto parsed = google::protobuf::util::JsonStringToMessage(json.dump(), &out.request, options);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": not an ExecuteRequest: ", std::string(parsed.message())));
  }
  if (out.request.request_id().empty() && !out.name.empty()) {
    out.request.set_request_id(out.name);
  }
  return out;
}

absl::StatusOr<RequestFile> ParseRequestFile(const std::string& text) {
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (json.is_discarded()) return absl::InvalidArgumentError("the file is not valid JSON");
  RequestFile file;
  for (const char* list_key : {"requests", "cases"}) {
    if (!json.is_object() || !json.contains(list_key)) continue;
    const Json& list = json[list_key];
    if (!list.is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(list_key, ": expected an array"));
    }
    file.is_list = true;
    for (size_t i = 0; i < list.size(); ++i) {
      absl::StatusOr<FileRequest> request =
          ParseRequestJson(list[i], absl::StrCat(list_key, "[", i, "]"));
      if (!request.ok()) return request.status();
      file.requests.push_back(*std::move(request));
    }
    return file;
  }
  absl::StatusOr<FileRequest> request = ParseRequestJson(std::move(json), "");
  if (!request.ok()) return request.status();
  file.requests.push_back(*std::move(request));
  return file;
}

}  // namespace dmlserve::client::cli
