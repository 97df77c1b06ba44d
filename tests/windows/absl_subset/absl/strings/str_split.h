// Windows cross-build stand-in for Abseil (see ../../README.md).
#ifndef DMLSERVE_ABSL_SUBSET_STRINGS_STR_SPLIT_H_
#define DMLSERVE_ABSL_SUBSET_STRINGS_STR_SPLIT_H_

#include <string>
#include <string_view>
#include <vector>

namespace absl {
namespace subset_internal {

class Splitter {
 public:
  Splitter(std::string_view text, std::string_view delimiter) {
    if (delimiter.empty()) {
      pieces_.push_back(text);
      return;
    }
    size_t start = 0;
    for (;;) {
      size_t at = text.find(delimiter, start);
      if (at == std::string_view::npos) break;
      pieces_.push_back(text.substr(start, at - start));
      start = at + delimiter.size();
    }
    pieces_.push_back(text.substr(start));
  }
  template <typename T>
  operator std::vector<T>() const {
    return std::vector<T>(pieces_.begin(), pieces_.end());
  }
  auto begin() const { return pieces_.begin(); }
  auto end() const { return pieces_.end(); }

 private:
  std::vector<std::string_view> pieces_;
};

}  // namespace subset_internal

inline subset_internal::Splitter StrSplit(std::string_view text, char delimiter) {
  return subset_internal::Splitter(text, std::string_view(&delimiter, 1));
}
inline subset_internal::Splitter StrSplit(std::string_view text, std::string_view delimiter) {
  return subset_internal::Splitter(text, delimiter);
}

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_STRINGS_STR_SPLIT_H_
