#ifndef DMLSERVE_KERNELS_DXBC_DISASSEMBLER_H_
#define DMLSERVE_KERNELS_DXBC_DISASSEMBLER_H_

// Text listing of SM5 program tokens in fxc's syntax, for inspecting built
// kernels (dmlserve-dxbc --disasm) and for readable test failures. Covers
// what the assembler emits; other opcodes are listed by number.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace dmlserve::dxbc {

// `program` starts with the version token.
absl::StatusOr<std::string> Disassemble(absl::Span<const uint32_t> program);

// Verifies the container (checksum included) and disassembles its program.
absl::StatusOr<std::string> DisassembleContainer(absl::Span<const uint8_t> blob);

}  // namespace dmlserve::dxbc

#endif  // DMLSERVE_KERNELS_DXBC_DISASSEMBLER_H_
