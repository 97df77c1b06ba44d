#include "kernels/core/tensor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dmlserve {

const std::string& Tensor::registered_id() const {
  static const std::string* const kNone = new std::string();
  return registration != nullptr ? registration->id() : *kNone;
}

void Tensor::set_registered_id(std::string id) {
  registration = id.empty() ? nullptr : std::make_shared<TensorRegistration>(std::move(id));
}

uint64_t ElementCount(const Shape& sizes) {
  uint64_t count = 1;
  for (uint32_t size : sizes) count *= size;
  return count;
}

std::string ShapeToString(const Shape& sizes) {
  // Sizes may come from a client: a list of a million stays a short message.
  constexpr size_t kMaxShown = 16;
  if (sizes.size() <= kMaxShown) return absl::StrCat("[", absl::StrJoin(sizes, ","), "]");
  const Shape shown(sizes.begin(), sizes.begin() + kMaxShown);
  return absl::StrCat("[", absl::StrJoin(shown, ","), ",... (", sizes.size(), " sizes)]");
}

Tensor Tensor::Allocate(DataType type, const Shape& sizes) {
  Tensor tensor;
  tensor.data_type = type;
  tensor.sizes = sizes;
  tensor.bytes = Buffer::Zeroed(ElementCount(sizes) * DataTypeSize(type));
  return tensor;
}

Tensor Tensor::AllocateUninitialized(DataType type, const Shape& sizes) {
  Tensor tensor;
  tensor.data_type = type;
  tensor.sizes = sizes;
  tensor.bytes = Buffer::Uninitialized(ElementCount(sizes) * DataTypeSize(type));
  return tensor;
}

}  // namespace dmlserve
