// Windows cross-build stand-in for Abseil (see ../../README.md).
#ifndef DMLSERVE_ABSL_SUBSET_STRINGS_STRIP_H_
#define DMLSERVE_ABSL_SUBSET_STRINGS_STRIP_H_

#include <string_view>

// As Abseil's strip.h, which includes ascii.h: code calls
// StripAsciiWhitespace with only strip.h included.
#include "absl/strings/ascii.h"

namespace absl {

inline bool ConsumePrefix(std::string_view* text, std::string_view prefix) {
  if (text->substr(0, prefix.size()) != prefix) return false;
  text->remove_prefix(prefix.size());
  return true;
}
inline bool ConsumeSuffix(std::string_view* text, std::string_view suffix) {
  if (text->size() < suffix.size() || text->substr(text->size() - suffix.size()) != suffix) {
    return false;
  }
  text->remove_suffix(suffix.size());
  return true;
}
inline std::string_view StripPrefix(std::string_view text, std::string_view prefix) {
  ConsumePrefix(&text, prefix);
  return text;
}

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_STRINGS_STRIP_H_
