#include "client/cli/json_pretty_print.h"

namespace dmlserve::client::cli {
namespace {

bool IsFlat(const Json& json) {
  if (!json.is_array()) return false;
  for (const Json& item : json) {
    if (item.is_structured()) return false;
  }
  return true;
}

void Print(const Json& json, int indent, int depth, std::string* out) {
  const std::string inner(static_cast<size_t>(indent * (depth + 1)), ' ');
  const std::string outer(static_cast<size_t>(indent * depth), ' ');
  if (json.is_object() && !json.empty()) {
    out->append("{\n");
    size_t i = 0;
    for (const auto& [key, value] : json.items()) {
      out->append(inner).append(Json(key).dump()).append(": ");
      Print(value, indent, depth + 1, out);
      out->append(++i < json.size() ? ",\n" : "\n");
    }
    out->append(outer).append("}");
  } else if (json.is_array() && !json.empty() && !IsFlat(json)) {
    out->append("[\n");
    for (size_t i = 0; i < json.size(); ++i) {
      out->append(inner);
      Print(json[i], indent, depth + 1, out);
      out->append(i + 1 < json.size() ? ",\n" : "\n");
    }
    out->append(outer).append("]");
  } else if (IsFlat(json)) {
    out->append("[");
    for (size_t i = 0; i < json.size(); ++i) {
      if (i > 0) out->append(", ");
      out->append(json[i].dump());
    }
    out->append("]");
  } else {
    out->append(json.dump());
  }
}

}  // namespace

std::string PrettyPrint(const Json& json, int indent) {
  std::string out;
  Print(json, indent, 0, &out);
  return out;
}

}  // namespace dmlserve::client::cli
