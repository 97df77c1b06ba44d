// Windows cross-build stand-in for Abseil (see ../../README.md).
//
// std::unordered_map with Abseil's hasher. dmlserve only uses the API both
// share (find, emplace, erase, clear, iteration), and std::unordered_map
// invalidates fewer iterators and pointers than flat_hash_map, so code that
// is correct with the real one is correct with this. (No contains(): that
// is C++20 in std.)
#ifndef DMLSERVE_ABSL_SUBSET_CONTAINER_FLAT_HASH_MAP_H_
#define DMLSERVE_ABSL_SUBSET_CONTAINER_FLAT_HASH_MAP_H_

#include <functional>
#include <memory>
#include <unordered_map>
#include <utility>

#include "absl/hash/hash.h"

namespace absl {
template <typename K, typename V, typename Hash = absl::Hash<K>, typename Eq = std::equal_to<K>,
          typename Allocator = std::allocator<std::pair<const K, V>>>
using flat_hash_map = std::unordered_map<K, V, Hash, Eq, Allocator>;
}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_CONTAINER_FLAT_HASH_MAP_H_
