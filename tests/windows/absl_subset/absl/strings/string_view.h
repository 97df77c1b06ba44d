// Windows cross-build stand-in for Abseil (see ../../README.md).
#ifndef DMLSERVE_ABSL_SUBSET_STRINGS_STRING_VIEW_H_
#define DMLSERVE_ABSL_SUBSET_STRINGS_STRING_VIEW_H_

#include <string_view>

namespace absl {
using std::string_view;
}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_STRINGS_STRING_VIEW_H_
