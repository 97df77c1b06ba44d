// Windows cross-build stand-in for Abseil (see ../../README.md).
#ifndef DMLSERVE_ABSL_SUBSET_TYPES_SPAN_H_
#define DMLSERVE_ABSL_SUBSET_TYPES_SPAN_H_

#include <cstddef>
#include <initializer_list>
#include <type_traits>
#include <utility>

namespace absl {

template <typename T>
class Span {
 public:
  using value_type = std::remove_cv_t<T>;
  using iterator = T*;
  using const_iterator = const T*;

  constexpr Span() = default;
  constexpr Span(T* data, size_t size) : data_(data), size_(size) {}
  template <size_t N>
  constexpr Span(T (&array)[N]) : data_(array), size_(N) {}
  template <typename C, typename = decltype(std::declval<C&>().data()),
            typename = std::enable_if_t<std::is_convertible_v<
                std::remove_pointer_t<decltype(std::declval<C&>().data())> (*)[], T (*)[]>>>
  constexpr Span(C& container) : data_(container.data()), size_(container.size()) {}
  template <typename C, typename U = T, typename = std::enable_if_t<std::is_const_v<U>>,
            typename = decltype(std::declval<const C&>().data())>
  constexpr Span(const C& container) : data_(container.data()), size_(container.size()) {}
  template <typename U = T, typename = std::enable_if_t<std::is_const_v<U>>>
  constexpr Span(std::initializer_list<value_type> list)
      : data_(list.begin()), size_(list.size()) {}

  constexpr T* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr size_t length() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr T& operator[](size_t i) const { return data_[i]; }
  constexpr T& front() const { return data_[0]; }
  constexpr T& back() const { return data_[size_ - 1]; }
  constexpr T* begin() const { return data_; }
  constexpr T* end() const { return data_ + size_; }
  constexpr Span subspan(size_t pos, size_t len = static_cast<size_t>(-1)) const {
    return Span(data_ + pos, len < size_ - pos ? len : size_ - pos);
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

template <typename T>
constexpr Span<T> MakeSpan(T* data, size_t size) {
  return Span<T>(data, size);
}
template <typename C>
constexpr auto MakeSpan(C& container) {
  return Span<std::remove_pointer_t<decltype(container.data())>>(container.data(),
                                                                 container.size());
}
template <typename T>
constexpr Span<const T> MakeConstSpan(const T* data, size_t size) {
  return Span<const T>(data, size);
}
template <typename C>
constexpr auto MakeConstSpan(const C& container) {
  return Span<const std::remove_pointer_t<decltype(container.data())>>(container.data(),
                                                                       container.size());
}

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_TYPES_SPAN_H_
