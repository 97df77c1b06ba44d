// Windows cross-build stand-in for Abseil (see ../../README.md).
#ifndef DMLSERVE_ABSL_SUBSET_STRINGS_STR_CAT_H_
#define DMLSERVE_ABSL_SUBSET_STRINGS_STR_CAT_H_

#include <string>
#include <string_view>
#include <type_traits>

namespace absl {
namespace subset_internal {

inline void Append(std::string& out, std::string_view piece) { out.append(piece); }
inline void Append(std::string& out, const char* piece) { out.append(piece); }
inline void Append(std::string& out, const std::string& piece) { out.append(piece); }
inline void Append(std::string& out, char) = delete;  // as in Abseil: ambiguous
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
void Append(std::string& out, T value) {
  out.append(std::to_string(value));
}

}  // namespace subset_internal

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  (subset_internal::Append(out, args), ...);
  return out;
}

template <typename... Args>
void StrAppend(std::string* out, const Args&... args) {
  (subset_internal::Append(*out, args), ...);
}

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_STRINGS_STR_CAT_H_
