#ifndef DMLSERVE_KERNELS_DXBC_DISASSEMBLER_H_
#define DMLSERVE_KERNELS_DXBC_DISASSEMBLER_H_

// Text listing of SM5 program tokens in fxc's syntax, for inspecting built
// kernels (dmlserve-dxbc --disasm) and for readable test failures. Covers
// what the assembler emits; other opcodes are listed by number.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace dmlserve::dxbc {

// `program` starts with the version token.
absl::StatusOr<std::string> Disassemble(absl::Span<const uint32_t> program);

// One instruction of a program, decoded for tools that measure kernels
// rather than read them (bench/d3d12_report.cc counts ALU work per MAC).
struct DisassembledInstruction {
  uint32_t opcode = 0;                // an Opcode value, or a number the tables do not know
  std::string name;                   // mnemonic with its suffixes: "if_nz", "sync_g_t", "imad_sat"
  std::vector<std::string> operands;  // as Disassemble lists them: "r3.xyzw", "t1", "l(8)"
  // Components the instruction writes: the write-mask bits of its
  // destination operands (a scalar destination counts 1, null 0). Zero for
  // declarations and flow control.
  int components_written = 0;
};

// The instructions of `program` (version and length tokens excluded), in
// order; Disassemble is these, indented by their if/loop nesting.
absl::StatusOr<std::vector<DisassembledInstruction>> DisassembleInstructions(
    absl::Span<const uint32_t> program);

// Verifies the container (checksum included) and disassembles its program.
absl::StatusOr<std::string> DisassembleContainer(absl::Span<const uint8_t> blob);

}  // namespace dmlserve::dxbc

#endif  // DMLSERVE_KERNELS_DXBC_DISASSEMBLER_H_
