// Windows cross-build stand-in for Abseil (see ../../README.md).
#ifndef DMLSERVE_ABSL_SUBSET_STRINGS_ASCII_H_
#define DMLSERVE_ABSL_SUBSET_STRINGS_ASCII_H_

#include <string_view>

namespace absl {

// The C locale's isspace, whatever the current locale (as Abseil).
inline bool ascii_isspace(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

inline std::string_view StripLeadingAsciiWhitespace(std::string_view text) {
  while (!text.empty() && ascii_isspace(text.front())) text.remove_prefix(1);
  return text;
}
inline std::string_view StripTrailingAsciiWhitespace(std::string_view text) {
  while (!text.empty() && ascii_isspace(text.back())) text.remove_suffix(1);
  return text;
}
inline std::string_view StripAsciiWhitespace(std::string_view text) {
  return StripTrailingAsciiWhitespace(StripLeadingAsciiWhitespace(text));
}

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_STRINGS_ASCII_H_
