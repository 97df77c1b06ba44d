// Windows cross-build stand-in for Abseil (see ../../README.md): printf
// formatting, with std::string / string_view arguments passed as C strings.
#ifndef DMLSERVE_ABSL_SUBSET_STRINGS_STR_FORMAT_H_
#define DMLSERVE_ABSL_SUBSET_STRINGS_STR_FORMAT_H_

#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>

namespace absl {
namespace subset_internal {

template <typename T>
decltype(auto) PrintfArg(const T& value) {
  if constexpr (std::is_same_v<T, std::string>) {
    return value.c_str();
  } else {
    static_assert(!std::is_same_v<T, std::string_view>, "string_view is not supported here");
    return value;
  }
}

}  // namespace subset_internal

template <typename... Args>
std::string StrFormat(const char* format, const Args&... args) {
  int size = std::snprintf(nullptr, 0, format, subset_internal::PrintfArg(args)...);
  if (size <= 0) return std::string();
  std::string out(static_cast<size_t>(size) + 1, '\0');
  std::snprintf(out.data(), out.size(), format, subset_internal::PrintfArg(args)...);
  out.resize(static_cast<size_t>(size));
  return out;
}

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_STRINGS_STR_FORMAT_H_
