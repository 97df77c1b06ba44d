#ifndef DMLSERVE_KERNELS_DXBC_OPERAND_H_
#define DMLSERVE_KERNELS_DXBC_OPERAND_H_

// An instruction operand of the SM5 assembler: a register (r#, x#[i], cb#[i],
// t#, u#, g#, thread-ID inputs, null) or an immediate, with a component
// selection and an optional negate/abs modifier.
//
// The component text means a write mask when the operand is a destination
// ("xy") and a select-1 or swizzle when it is a source ("x", "xxyy"; a short
// swizzle repeats its last letter, as fxc prints them). Operands are small
// values: selections return modified copies, as in `r(0).x()`.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "kernels/dxbc/token_format.h"

namespace dmlserve::dxbc {

class Operand {
 public:
  Operand() = default;

  static Operand Register(OperandType type, uint32_t index);
  // Two-dimensional registers: cb#[index] and x#[index].
  static Operand Register2D(OperandType type, uint32_t index0, uint32_t index1);
  // x#[relative + offset] or cb#[relative + offset]: `relative` is a
  // select-1 temp (r1.x).
  static Operand Indexed(OperandType type, uint32_t index0, const Operand& relative,
                         uint32_t offset);
  // Registers without an index (null, thread-ID inputs).
  static Operand Special(OperandType type);
  static Operand Immediate(uint32_t value);
  static Operand Immediate4(uint32_t x, uint32_t y, uint32_t z, uint32_t w);

  // Component selection (see above). Invalid text is reported by the
  // assembler when the operand is used.
  Operand sel(absl::string_view components) const;
  Operand x() const { return sel("x"); }
  Operand y() const { return sel("y"); }
  Operand z() const { return sel("z"); }
  Operand w() const { return sel("w"); }
  Operand xy() const { return sel("xy"); }
  Operand zw() const { return sel("zw"); }
  Operand xyz() const { return sel("xyz"); }
  Operand xyzw() const { return sel("xyzw"); }

  // Source modifiers: negation (two's complement for integer instructions)
  // and absolute value.
  Operand operator-() const;
  Operand abs() const;

  OperandType type() const { return type_; }
  bool valid() const { return valid_; }
  bool is_immediate() const { return type_ == OperandType::kImmediate32; }
  int index_count() const { return index_count_; }
  uint32_t index(int i) const { return index_[i]; }
  const std::string& components() const { return components_; }
  // The register that relatively addresses the last index, if any.
  const Operand* relative() const { return relative_.get(); }

  // Appends the operand's tokens. `is_destination` picks mask encoding.
  absl::Status Encode(bool is_destination, std::vector<uint32_t>* tokens) const;

  // Number of components the operand's register file has: 0 (null), 1
  // (scalar immediates) or 4. vThreadIDInGroupFlattened is read like a
  // 4-component register (.x), as fxc writes it; only its declaration has
  // no components.
  int register_components() const;

 private:
  bool valid_ = false;
  OperandType type_ = OperandType::kNull;
  int index_count_ = 0;
  uint32_t index_[2] = {0, 0};
  // Relative addressing of the last index (x#[r0.x + 3]).
  std::shared_ptr<const Operand> relative_;
  std::string components_;  // empty: all ("xyzw")
  bool negate_ = false;
  bool absolute_ = false;
  int immediate_count_ = 0;
  uint32_t immediate_[4] = {0, 0, 0, 0};
};

// Parses "xyzw" letters; returns false on an invalid or empty text or
// (for masks) letters out of order or repeated.
bool ParseWriteMask(absl::string_view text, uint32_t* mask);
bool ParseSwizzle(absl::string_view text, uint32_t* swizzle);

}  // namespace dmlserve::dxbc

#endif  // DMLSERVE_KERNELS_DXBC_OPERAND_H_
