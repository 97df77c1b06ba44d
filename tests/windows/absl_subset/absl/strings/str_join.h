// Windows cross-build stand-in for Abseil (see ../../README.md).
#ifndef DMLSERVE_ABSL_SUBSET_STRINGS_STR_JOIN_H_
#define DMLSERVE_ABSL_SUBSET_STRINGS_STR_JOIN_H_

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace absl {

template <typename Range, typename Formatter>
std::string StrJoin(const Range& range, std::string_view separator, Formatter&& formatter) {
  std::string out;
  bool first = true;
  for (const auto& element : range) {
    if (!first) out.append(separator);
    first = false;
    formatter(&out, element);
  }
  return out;
}

template <typename Range>
std::string StrJoin(const Range& range, std::string_view separator) {
  return StrJoin(range, separator,
                 [](std::string* out, const auto& element) { StrAppend(out, element); });
}

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_STRINGS_STR_JOIN_H_
