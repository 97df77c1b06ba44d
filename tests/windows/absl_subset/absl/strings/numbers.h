// Windows cross-build stand-in for Abseil (see ../../README.md).
#ifndef DMLSERVE_ABSL_SUBSET_STRINGS_NUMBERS_H_
#define DMLSERVE_ABSL_SUBSET_STRINGS_NUMBERS_H_

#include <charconv>
#include <string_view>
#include <type_traits>

namespace absl {

template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
bool SimpleAtoi(std::string_view text, T* out) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return false;
  T value{};
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return false;
  *out = value;
  return true;
}

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_STRINGS_NUMBERS_H_
