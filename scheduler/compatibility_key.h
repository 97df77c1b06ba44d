#ifndef DMLSERVE_SCHEDULER_COMPATIBILITY_KEY_H_
#define DMLSERVE_SCHEDULER_COMPATIBILITY_KEY_H_

// Which jobs may share a batch.
//
// A Device runs a batch as one unit of work, so everything a device would bake
// into its compiled operator or upload once per batch must agree across the
// batch:
//  - scans: operator kind, data type, direction and exclusive flag (shapes and
//    axes differ freely: a batch is a list of segments);
//  - matrix multiplies: A, B and output data types, and the very same B with
//    the same B scale, B zero point and B quantization axis (the shared weight
//    is what makes batching pay off). A's shape, M, and the A/output
//    quantization vary per job.
//
// Registered tensors are identified by their registry id (cheap, the common
// case). Inline tensors are identified by content: the key carries a hash of
// type, sizes and bytes, and equality compares the bytes, so different weights
// that collide in the hash never share a batch.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/core/data_type.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"

namespace dmlserve {

class CompatibilityKey {
 public:
  static CompatibilityKey For(const Operation& operation);

  OperatorKind kind() const { return kind_; }

  // Registered tensors every job of a batch with this key reads (B and its
  // quantization parameters when registered); devices may hold them resident.
  const std::vector<std::string>& registered_ids() const { return registered_ids_; }

  bool operator==(const CompatibilityKey& other) const;
  bool operator!=(const CompatibilityKey& other) const { return !(*this == other); }

  template <typename H>
  friend H AbslHashValue(H state, const CompatibilityKey& key) {
    return H::combine(std::move(state), key.hash_);
  }

 private:
  // A tensor that must be identical across a batch.
  struct TensorIdentity {
    DataType data_type = DataType::kUnknown;
    Shape sizes;
    std::string registered_id;      // compared when non-empty
    std::shared_ptr<Buffer> bytes;  // compared otherwise
    size_t hash = 0;

    static TensorIdentity Of(const Tensor& tensor);
    bool operator==(const TensorIdentity& other) const;
  };

  CompatibilityKey() = default;
  void ComputeHash();

  OperatorKind kind_ = OperatorKind::kCumulativeSummation;
  // Scans: the input type. Matrix multiplies: A's type.
  DataType data_type_ = DataType::kUnknown;
  // Scans only.
  AxisDirection direction_ = AxisDirection::kIncreasing;
  bool exclusive_ = false;
  // Matrix multiplies only.
  DataType b_data_type_ = DataType::kUnknown;
  DataType output_data_type_ = DataType::kUnknown;
  QuantizationAxis b_quantization_ = QuantizationAxis::kPerTensor;
  TensorIdentity b_;
  TensorIdentity b_scale_;
  TensorIdentity b_zero_point_;

  std::vector<std::string> registered_ids_;
  size_t hash_ = 0;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_COMPATIBILITY_KEY_H_
