// Windows cross-build stand-in for Abseil (see ../../README.md).
//
// The AbslHashValue protocol, so that types that make themselves hashable for
// Abseil (a `template <typename H> friend H AbslHashValue(H, const T&)` that
// calls H::combine) hash here unchanged, and HashOf/Hash on top of it.
// Covers the value types dmlserve hashes: integers, enums, bool, strings and
// string_views (by content), std::vector (elements, then size). The mixing is
// Abseil's (a 128-bit multiply folded to 64 bits), with a fixed seed: unlike
// Abseil's, values are the same from one run to the next, which nothing may
// rely on either way.
#ifndef DMLSERVE_ABSL_SUBSET_HASH_HASH_H_
#define DMLSERVE_ABSL_SUBSET_HASH_HASH_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace absl {
namespace subset_internal {

class HashState {
 public:
  static HashState combine(HashState state) { return state; }
  template <typename T, typename... Ts>
  static HashState combine(HashState state, const T& value, const Ts&... values) {
    // Unqualified: finds the overloads below (this namespace) and the
    // hashed type's own AbslHashValue (its namespace) by argument lookup.
    return combine(AbslHashValue(std::move(state), value), values...);
  }
  static HashState combine_contiguous(HashState state, const unsigned char* data, size_t size) {
    for (; size >= 8; data += 8, size -= 8) {
      uint64_t word;
      std::memcpy(&word, data, 8);
      state.Mix(word);
    }
    uint64_t tail = 0;
    if (size > 0) std::memcpy(&tail, data, size);  // data may be null when size is 0
    state.Mix(tail);
    return state;
  }

  // Internal: for the overloads below, and Hash.
  void Mix(uint64_t value) {
    const unsigned __int128 product =
        static_cast<unsigned __int128>(state_ + value) * 0x9ddfea08eb382d69u;
    state_ = static_cast<uint64_t>(product >> 64) ^ static_cast<uint64_t>(product);
  }
  size_t value() const { return static_cast<size_t>(state_); }

 private:
  uint64_t state_ = 0x243f6a8885a308d3u;  // any fixed nonzero seed
};

template <typename T, typename = std::enable_if_t<std::is_integral_v<T> || std::is_enum_v<T>>>
HashState AbslHashValue(HashState state, T value) {
  state.Mix(static_cast<uint64_t>(value));
  return state;
}
inline HashState AbslHashValue(HashState state, std::string_view text) {
  state = HashState::combine_contiguous(
      std::move(state), reinterpret_cast<const unsigned char*>(text.data()), text.size());
  return HashState::combine(std::move(state), text.size());
}
inline HashState AbslHashValue(HashState state, const std::string& text) {
  return AbslHashValue(std::move(state), std::string_view(text));
}
template <typename T, typename A>
HashState AbslHashValue(HashState state, const std::vector<T, A>& elements) {
  for (const auto& element : elements) state = HashState::combine(std::move(state), element);
  return HashState::combine(std::move(state), elements.size());
}

}  // namespace subset_internal

template <typename T>
struct Hash {
  size_t operator()(const T& value) const {
    return subset_internal::HashState::combine(subset_internal::HashState(), value).value();
  }
};

// As Abseil's: hashes the values together, as a tuple of them would.
template <typename... Ts>
size_t HashOf(const Ts&... values) {
  return subset_internal::HashState::combine(subset_internal::HashState(), values...).value();
}

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_HASH_HASH_H_
