#include "scheduler/compatibility_key.h"

#include <variant>

#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "kernels/core/overloaded.h"

namespace dmlserve {

CompatibilityKey::TensorIdentity CompatibilityKey::TensorIdentity::Of(const Tensor& tensor) {
  TensorIdentity identity;
  identity.data_type = tensor.data_type;
  identity.sizes = tensor.sizes;
  if (!tensor.present()) return identity;  // an absent zero point
  if (!tensor.registered_id().empty()) {
    identity.registered_id = tensor.registered_id();
    identity.hash = absl::HashOf(identity.registered_id);
    return identity;
  }
  identity.bytes = tensor.bytes;
  // Hashing the bytes once per job is far cheaper than the multiply itself.
  absl::string_view contents = tensor.bytes ? tensor.bytes->view() : absl::string_view();
  identity.hash = absl::HashOf(static_cast<int>(tensor.data_type), tensor.sizes, contents);
  return identity;
}

bool CompatibilityKey::TensorIdentity::operator==(const TensorIdentity& other) const {
  if (data_type != other.data_type || sizes != other.sizes) return false;
  if (registered_id.empty() != other.registered_id.empty()) return false;
  if (!registered_id.empty()) return registered_id == other.registered_id;
  if (hash != other.hash) return false;
  if (bytes == other.bytes) return true;  // shared storage, or both absent
  if (bytes == nullptr || other.bytes == nullptr) return false;
  return bytes->view() == other.bytes->view();
}

CompatibilityKey CompatibilityKey::For(const Operation& operation) {
  CompatibilityKey key;
  std::visit(
      Overloaded{
          [&key](const ScanOperation& op) {
            key.kind_ = op.kind;
            key.data_type_ = op.input.data_type;
            key.direction_ = op.direction;
            key.exclusive_ = op.exclusive;
          },
          [&key](const QuantizedMatMulOperation& op) {
            key.kind_ = OperatorKind::kQuantizedLinearMatrixMultiply;
            key.data_type_ = op.a.data_type;
            key.b_data_type_ = op.b.data_type;
            key.output_data_type_ = op.output_data_type;
            key.b_quantization_ = op.b_quantization;
            key.b_ = TensorIdentity::Of(op.b);
            key.b_scale_ = TensorIdentity::Of(op.b_scale);
            key.b_zero_point_ = TensorIdentity::Of(op.b_zero_point);
            for (const TensorIdentity* identity : {&key.b_, &key.b_scale_, &key.b_zero_point_}) {
              if (!identity->registered_id.empty()) {
                key.registered_ids_.push_back(identity->registered_id);
              }
            }
          },
      },
      operation);
  key.ComputeHash();
  return key;
}

void CompatibilityKey::ComputeHash() {
  hash_ = absl::HashOf(static_cast<int>(kind_), static_cast<int>(data_type_),
                       static_cast<int>(direction_), exclusive_, static_cast<int>(b_data_type_),
                       static_cast<int>(output_data_type_), static_cast<int>(b_quantization_),
                       b_.hash, b_scale_.hash, b_zero_point_.hash);
}

bool CompatibilityKey::operator==(const CompatibilityKey& other) const {
  return hash_ == other.hash_ && kind_ == other.kind_ && data_type_ == other.data_type_ &&
         direction_ == other.direction_ && exclusive_ == other.exclusive_ &&
         b_data_type_ == other.b_data_type_ && output_data_type_ == other.output_data_type_ &&
         b_quantization_ == other.b_quantization_ && b_ == other.b_ && b_scale_ == other.b_scale_ &&
         b_zero_point_ == other.b_zero_point_;
}

}  // namespace dmlserve
