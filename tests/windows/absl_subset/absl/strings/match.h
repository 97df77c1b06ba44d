// Windows cross-build stand-in for Abseil (see ../../README.md).
#ifndef DMLSERVE_ABSL_SUBSET_STRINGS_MATCH_H_
#define DMLSERVE_ABSL_SUBSET_STRINGS_MATCH_H_

#include <string_view>

namespace absl {

inline bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}
inline bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}
inline bool StrContains(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_STRINGS_MATCH_H_
