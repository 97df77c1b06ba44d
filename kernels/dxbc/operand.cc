#include "kernels/dxbc/operand.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace dmlserve::dxbc {
namespace {

int ComponentIndex(char c) {
  switch (c) {
    case 'x':
      return 0;
    case 'y':
      return 1;
    case 'z':
      return 2;
    case 'w':
      return 3;
    default:
      return -1;
  }
}

}  // namespace

bool ParseWriteMask(absl::string_view text, uint32_t* mask) {
  if (text.empty() || text.size() > 4) return false;
  uint32_t bits = 0;
  int last = -1;
  for (char c : text) {
    int i = ComponentIndex(c);
    if (i <= last) return false;
    bits |= 1u << i;
    last = i;
  }
  *mask = bits;
  return true;
}

bool ParseSwizzle(absl::string_view text, uint32_t* swizzle) {
  if (text.empty() || text.size() > 4) return false;
  uint32_t bits = 0;
  int c = 0;
  for (int i = 0; i < 4; ++i) {
    if (i < static_cast<int>(text.size())) {
      c = ComponentIndex(text[i]);
      if (c < 0) return false;
    }
    bits |= static_cast<uint32_t>(c) << (2 * i);
  }
  *swizzle = bits;
  return true;
}

Operand Operand::Register(OperandType type, uint32_t index) {
  Operand op;
  op.valid_ = true;
  op.type_ = type;
  op.index_count_ = 1;
  op.index_[0] = index;
  return op;
}

Operand Operand::Register2D(OperandType type, uint32_t index0, uint32_t index1) {
  Operand op = Register(type, index0);
  op.index_count_ = 2;
  op.index_[1] = index1;
  return op;
}

Operand Operand::Indexed(OperandType type, uint32_t index0, const Operand& relative,
                         uint32_t offset) {
  Operand op = Register2D(type, index0, offset);
  op.relative_ = std::make_shared<const Operand>(relative);
  return op;
}

Operand Operand::Special(OperandType type) {
  Operand op;
  op.valid_ = true;
  op.type_ = type;
  return op;
}

Operand Operand::Immediate(uint32_t value) {
  Operand op = Special(OperandType::kImmediate32);
  op.immediate_count_ = 1;
  op.immediate_[0] = value;
  return op;
}

Operand Operand::Immediate4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) {
  Operand op = Special(OperandType::kImmediate32);
  op.immediate_count_ = 4;
  op.immediate_[0] = x;
  op.immediate_[1] = y;
  op.immediate_[2] = z;
  op.immediate_[3] = w;
  return op;
}

Operand Operand::sel(absl::string_view components) const {
  Operand op = *this;
  op.components_ = std::string(components);
  return op;
}

Operand Operand::operator-() const {
  Operand op = *this;
  op.negate_ = !op.negate_;
  return op;
}

Operand Operand::abs() const {
  Operand op = *this;
  op.absolute_ = true;
  op.negate_ = false;
  return op;
}

int Operand::register_components() const {
  switch (type_) {
    case OperandType::kNull:
      return 0;
    case OperandType::kImmediate32:
      return immediate_count_;
    default:
      return 4;
  }
}

absl::Status Operand::Encode(bool is_destination, std::vector<uint32_t>* tokens) const {
  if (!valid_) return absl::InvalidArgumentError("uninitialised operand");
  uint32_t token = static_cast<uint32_t>(type_) << kOperandTypeShift;
  const int comps = register_components();
  if (comps == 0) {
    token |= 0u << kOperandNumComponentsShift;
  } else if (comps == 1) {
    token |= 1u << kOperandNumComponentsShift;
    if (!components_.empty() && components_ != "x") {
      return absl::InvalidArgumentError(
          absl::StrCat("scalar operand cannot select '", components_, "'"));
    }
  } else {
    token |= 2u << kOperandNumComponentsShift;
    if (type_ == OperandType::kImmediate32) {
      // fxc writes vector immediates in mask mode with an empty mask.
      if (!components_.empty()) {
        return absl::InvalidArgumentError("immediates take no component selection");
      }
    } else if (is_destination) {
      uint32_t mask = 0xf;
      if (!components_.empty() && !ParseWriteMask(components_, &mask)) {
        return absl::InvalidArgumentError(absl::StrCat("bad write mask '", components_, "'"));
      }
      token |= kSelectionMask << kOperandSelectionModeShift;
      token |= mask << kOperandComponentsShift;
    } else if (components_.size() == 1) {
      int c = ComponentIndex(components_[0]);
      if (c < 0) {
        return absl::InvalidArgumentError(absl::StrCat("bad component '", components_, "'"));
      }
      token |= kSelectionSelect1 << kOperandSelectionModeShift;
      token |= static_cast<uint32_t>(c) << kOperandComponentsShift;
    } else {
      uint32_t swizzle = 0xe4;  // xyzw
      if (!components_.empty() && !ParseSwizzle(components_, &swizzle)) {
        return absl::InvalidArgumentError(absl::StrCat("bad swizzle '", components_, "'"));
      }
      token |= kSelectionSwizzle << kOperandSelectionModeShift;
      token |= swizzle << kOperandComponentsShift;
    }
  }
  token |= static_cast<uint32_t>(index_count_) << kOperandIndexDimensionShift;
  if (relative_) {
    token |= kIndexImmediate32PlusRelative
             << (kOperandIndexRepresentationShift + 3 * (index_count_ - 1));
  }
  uint32_t modifier = 0;
  if (negate_ || absolute_) {
    if (is_destination) return absl::InvalidArgumentError("modifier on a destination");
    modifier = absolute_ ? (negate_ ? kModifierAbsNeg : kModifierAbs) : kModifierNeg;
    token |= kOperandExtendedBit;
  }
  tokens->push_back(token);
  if (modifier != 0) tokens->push_back(modifier);
  for (int i = 0; i < index_count_; ++i) {
    tokens->push_back(index_[i]);
    if (relative_ && i == index_count_ - 1) {
      if (relative_->type_ != OperandType::kTemp || relative_->components_.size() != 1) {
        return absl::InvalidArgumentError("relative index must be a select-1 temp (r#.x)");
      }
      absl::Status status = relative_->Encode(/*is_destination=*/false, tokens);
      if (!status.ok()) return status;
    }
  }
  for (int i = 0; i < immediate_count_; ++i) tokens->push_back(immediate_[i]);
  return absl::OkStatus();
}

}  // namespace dmlserve::dxbc
