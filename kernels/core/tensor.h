#ifndef DMLSERVE_KERNELS_CORE_TENSOR_H_
#define DMLSERVE_KERNELS_CORE_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
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
// What makes a Tensor a registered one: its id (the public id plus a
// generation), shared by every copy of the tensor, the registry's and those
// in jobs. When the last copy goes, i.e. the tensor was released and no job
// still reads it, `on_last_copy` runs (the registry tells the devices to
// drop their resident copies): a job queued when the tensor was released may
// still upload it, and the eviction waits for that job. One pointer in
// Tensor rather than an id string and a token keeps every operation (eight
// tensors for a matrix multiply) small on the request path.
class TensorRegistration {
 public:
  explicit TensorRegistration(std::string id,
                              std::function<void(const std::string&)> on_last_copy = nullptr)
      : id_(std::move(id)), on_last_copy_(std::move(on_last_copy)) {}
  ~TensorRegistration() {
    if (on_last_copy_) on_last_copy_(id_);
  }
  TensorRegistration(const TensorRegistration&) = delete;
  TensorRegistration& operator=(const TensorRegistration&) = delete;

  const std::string& id() const { return id_; }

 private:
  const std::string id_;
  const std::function<void(const std::string&)> on_last_copy_;
};

struct Tensor {
  DataType data_type = DataType::kUnknown;
  Shape sizes;
  std::shared_ptr<Buffer> bytes;
  // Set when the tensor is a registered one (see TensorRegistration).
  std::shared_ptr<const TensorRegistration> registration;

  // The registration's id, "" when not registered. Devices key resident
  // copies (uploaded weights) by it.
  const std::string& registered_id() const;
  // Marks the tensor registered under `id` with nothing to do when its last
  // copy goes (tests, benchmarks); "" makes it unregistered.
  void set_registered_id(std::string id);

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
