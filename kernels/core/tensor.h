#ifndef DMLSERVE_KERNELS_CORE_TENSOR_H_
#define DMLSERVE_KERNELS_CORE_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/inlined_vector.h"
#include "kernels/core/buffer.h"
#include "kernels/core/data_type.h"

namespace dmlserve {

inline constexpr int kMaxDimensions = 8;

// Dimension sizes, outermost first.
using Shape = absl::InlinedVector<uint32_t, kMaxDimensions>;

// Product of all sizes (1 for an empty shape). The caller has validated that
// it does not overflow (see operation.h).
uint64_t ElementCount(const Shape& sizes);

// "[1,1,3,4]"; past 16 sizes, the first 16 and the count.
std::string ShapeToString(const Shape& sizes);

// A dense tensor: `bytes` holds the elements packed little-endian, row-major.
//
// The bytes are shared, not copied, between a request, the tensor registry and
// the batches that read them (two tensors share storage iff they hold the same
// Buffer pointer); once a Tensor is handed to the scheduler nobody writes to
// its bytes again. An absent optional tensor (a zero point that was
// not given) has data_type kUnknown.
struct Tensor {
  DataType data_type = DataType::kUnknown;
  Shape sizes;
  std::shared_ptr<Buffer> bytes;
  // Non-empty when the tensor is a registered one; devices key resident
  // copies (uploaded weights) by it.
  std::string registered_id;
  // Registered tensors only: shared by every copy of the tensor (the
  // registry's and those in jobs). When the last copy is gone, i.e. the
  // tensor was released and no job still reads it, the devices are told to
  // drop their resident copies. A job that was queued when the tensor was
  // released may still upload it; the eviction then waits for that job.
  std::shared_ptr<const void> registration;

  bool present() const { return data_type != DataType::kUnknown; }
  uint64_t element_count() const { return ElementCount(sizes); }
  size_t byte_size() const { return bytes ? bytes->size() : 0; }
  const uint8_t* data() const {
    return bytes ? reinterpret_cast<const uint8_t*>(bytes->data()) : nullptr;
  }
  uint8_t* mutable_data() { return reinterpret_cast<uint8_t*>(bytes->data()); }
  template <typename T>
  const T* data_as() const {
    return reinterpret_cast<const T*>(data());
  }
  template <typename T>
  T* mutable_data_as() {
    return reinterpret_cast<T*>(mutable_data());
  }

  // A tensor of the given type and sizes with zero-filled storage.
  static Tensor Allocate(DataType type, const Shape& sizes);
  // The same with pooled storage whose contents are unspecified: for kernel
  // outputs, which overwrite every byte (zero-filling a 64 MiB output would
  // cost as much as the scan that overwrites it).
  static Tensor AllocateUninitialized(DataType type, const Shape& sizes);
};

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CORE_TENSOR_H_
