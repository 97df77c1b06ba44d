#include "client/cli/number_list.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dmlserve::client::cli {

absl::StatusOr<std::vector<uint32_t>> ParseSizes(absl::string_view text) {
  std::vector<uint32_t> sizes;
  if (absl::StripAsciiWhitespace(text).empty()) return sizes;
  for (absl::string_view token : absl::StrSplit(text, ',')) {
    token = absl::StripAsciiWhitespace(token);
    uint32_t size;
    if (!absl::SimpleAtoi(token, &size) || (!token.empty() && token[0] == '-')) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", token, "\" is not a dimension size (0 to 4294967295)"));
    }
    sizes.push_back(size);
  }
  return sizes;
}

absl::StatusOr<Json> ParseNumberList(absl::string_view text) {
  Json values = Json::array();
  if (absl::StripAsciiWhitespace(text).empty()) return values;
  for (absl::string_view token : absl::StrSplit(text, ',')) {
    token = absl::StripAsciiWhitespace(token);
    int64_t signed_value;
    uint64_t unsigned_value;
    double float_value;
    if (absl::SimpleAtoi(token, &signed_value)) {
      values.push_back(signed_value);
    } else if (absl::SimpleAtoi(token, &unsigned_value)) {
      values.push_back(unsigned_value);
    } else if (absl::SimpleAtod(token, &float_value)) {
      values.push_back(float_value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("\"", token, "\" is not a number"));
    }
  }
  return values;
}

}  // namespace dmlserve::client::cli
