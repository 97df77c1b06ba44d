#ifndef DMLSERVE_KERNELS_DXBC_TOKEN_FORMAT_H_
#define DMLSERVE_KERNELS_DXBC_TOKEN_FORMAT_H_

// The Shader Model 4/5 tokenized program format (what fxc writes into a DXBC
// SHEX chunk): opcode numbers, operand types and the bit fields of opcode and
// operand tokens. Values follow Microsoft's d3d11TokenizedProgramFormat.hpp;
// only what the dmlserve assembler emits or disassembles is listed.

#include <cstdint>

#include "absl/strings/string_view.h"

namespace dmlserve::dxbc {

enum class Opcode : uint32_t {
  kAdd = 0x00,
  kAnd = 0x01,
  kBreak = 0x02,
  kBreakc = 0x03,
  kContinue = 0x07,
  kContinuec = 0x08,
  kDiv = 0x0e,
  kElse = 0x12,
  kEndif = 0x15,
  kEndloop = 0x16,
  kEq = 0x18,
  kFtoi = 0x1b,
  kFtou = 0x1c,
  kGe = 0x1d,
  kIadd = 0x1e,
  kIf = 0x1f,
  kIeq = 0x20,
  kIge = 0x21,
  kIlt = 0x22,
  kImad = 0x23,
  kImax = 0x24,
  kImin = 0x25,
  kImul = 0x26,
  kIne = 0x27,
  kIneg = 0x28,
  kIshl = 0x29,
  kIshr = 0x2a,
  kItof = 0x2b,
  kLoop = 0x30,
  kLt = 0x31,
  kMad = 0x32,
  kMin = 0x33,
  kMax = 0x34,
  kMov = 0x36,
  kMovc = 0x37,
  kMul = 0x38,
  kNe = 0x39,
  kNot = 0x3b,
  kOr = 0x3c,
  kRet = 0x3e,
  kRetc = 0x3f,
  kRoundNe = 0x40,
  kRoundNi = 0x41,
  kRoundPi = 0x42,
  kRoundZ = 0x43,
  kUdiv = 0x4e,
  kUlt = 0x4f,
  kUge = 0x50,
  kUmul = 0x51,
  kUmad = 0x52,
  kUmax = 0x53,
  kUmin = 0x54,
  kUshr = 0x55,
  kUtof = 0x56,
  kXor = 0x57,
  kDclConstantBuffer = 0x59,
  kDclInput = 0x5f,
  kDclTemps = 0x68,
  kDclIndexableTemp = 0x69,
  kDclGlobalFlags = 0x6a,
  kF32tof16 = 0x82,
  kF16tof32 = 0x83,
  kUaddc = 0x84,
  kUsubb = 0x85,
  kCountbits = 0x86,
  kFirstbitHi = 0x87,
  kFirstbitLo = 0x88,
  kUbfe = 0x8a,
  kIbfe = 0x8b,
  kBfi = 0x8c,
  kBfrev = 0x8d,
  kDclThreadGroup = 0x9b,
  kDclUavRaw = 0x9d,
  kDclTgsmRaw = 0x9f,
  kDclTgsmStructured = 0xa0,
  kDclResourceRaw = 0xa1,
  kLdRaw = 0xa5,
  kStoreRaw = 0xa6,
  kLdStructured = 0xa7,
  kStoreStructured = 0xa8,
  kAtomicIadd = 0xad,
  kImmAtomicIadd = 0xb4,
  kImmAtomicExch = 0xb8,
  kSync = 0xbe,
};

enum class OperandType : uint32_t {
  kTemp = 0x00,
  kIndexableTemp = 0x03,
  kImmediate32 = 0x04,
  kResource = 0x07,
  kConstantBuffer = 0x08,
  kNull = 0x0d,
  kUav = 0x1e,
  kThreadGroupSharedMemory = 0x1f,
  kThreadId = 0x20,
  kThreadGroupId = 0x21,
  kThreadIdInGroup = 0x22,
  kThreadIdInGroupFlattened = 0x24,
};

// Opcode token: [10:0] opcode, [23:11] opcode-specific controls,
// [30:24] instruction length in tokens (opcode token included), [31] extended.
inline constexpr uint32_t kOpcodeMask = 0x7ff;
inline constexpr uint32_t kControlsMask = 0x00fff800;
inline constexpr int kInstructionLengthShift = 24;
inline constexpr uint32_t kMaxInstructionLength = 0x7f;
inline constexpr uint32_t kSaturateBit = 1u << 13;
inline constexpr uint32_t kTestNonZeroBit = 1u << 18;  // if/breakc/retc: _nz
inline constexpr uint32_t kConstantBufferDynamicIndexed = 1u << 11;
inline constexpr uint32_t kUavGloballyCoherent = 1u << 16;

// sync flags (controls of kSync).
inline constexpr uint32_t kSyncThreadsInGroup = 1u << 11;     // _t
inline constexpr uint32_t kSyncGroupSharedMemory = 1u << 12;  // _g
inline constexpr uint32_t kSyncUavMemoryGroup = 1u << 13;     // _ugroup
inline constexpr uint32_t kSyncUavMemoryGlobal = 1u << 14;    // _uglobal

// dcl_globalFlags flags.
inline constexpr uint32_t kGlobalFlagRefactoringAllowed = 1u << 11;
inline constexpr uint32_t kGlobalFlagEnableRawAndStructuredBuffers = 1u << 14;

// Operand token fields.
inline constexpr int kOperandNumComponentsShift = 0;  // 0: none, 1: one, 2: four
inline constexpr int kOperandSelectionModeShift = 2;  // 0: mask, 1: swizzle, 2: select1
inline constexpr int kOperandComponentsShift = 4;     // mask / swizzle / select1 bits
inline constexpr int kOperandTypeShift = 12;
inline constexpr int kOperandIndexDimensionShift = 20;
inline constexpr int kOperandIndexRepresentationShift = 22;  // + 3 * dimension
inline constexpr uint32_t kOperandExtendedBit = 1u << 31;

inline constexpr uint32_t kSelectionMask = 0;
inline constexpr uint32_t kSelectionSwizzle = 1;
inline constexpr uint32_t kSelectionSelect1 = 2;

inline constexpr uint32_t kIndexImmediate32 = 0;
inline constexpr uint32_t kIndexRelative = 2;
inline constexpr uint32_t kIndexImmediate32PlusRelative = 3;

// Extended operand token (after an operand token with kOperandExtendedBit):
// type 1 = modifier, modifier in bits [13:6].
inline constexpr uint32_t kModifierNeg = 0x41;
inline constexpr uint32_t kModifierAbs = 0x81;
inline constexpr uint32_t kModifierAbsNeg = 0xc1;

// Program version token for cs_5_0: program type 5 (compute) in [31:16],
// major version in [7:4], minor in [3:0].
inline constexpr uint32_t kComputeShader50Version = (5u << 16) | (5u << 4) | 0u;

// How many destination and source operands an instruction has, and its
// mnemonic; null for opcodes the assembler does not know.
struct OpcodeInfo {
  Opcode opcode;
  absl::string_view name;
  int num_dst;
  int num_src;
};
const OpcodeInfo* FindOpcodeInfo(uint32_t opcode);

}  // namespace dmlserve::dxbc

#endif  // DMLSERVE_KERNELS_DXBC_TOKEN_FORMAT_H_
