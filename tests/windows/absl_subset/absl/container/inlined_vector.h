// Windows cross-build stand-in for Abseil (see ../../README.md).
#ifndef DMLSERVE_ABSL_SUBSET_CONTAINER_INLINED_VECTOR_H_
#define DMLSERVE_ABSL_SUBSET_CONTAINER_INLINED_VECTOR_H_

#include <cstddef>
#include <memory>
#include <vector>

namespace absl {
template <typename T, size_t N, typename A = std::allocator<T>>
using InlinedVector = std::vector<T, A>;
}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_CONTAINER_INLINED_VECTOR_H_
