#include "kernels/dxbc/token_format.h"

namespace dmlserve::dxbc {
namespace {

// Declarations are listed with 0 operands: their operand layout is
// instruction-specific and handled separately by the disassembler.
constexpr OpcodeInfo kOpcodes[] = {
    {Opcode::kAdd, "add", 1, 2},
    {Opcode::kAnd, "and", 1, 2},
    {Opcode::kBreak, "break", 0, 0},
    {Opcode::kBreakc, "breakc", 0, 1},
    {Opcode::kContinue, "continue", 0, 0},
    {Opcode::kContinuec, "continuec", 0, 1},
    {Opcode::kDiv, "div", 1, 2},
    {Opcode::kElse, "else", 0, 0},
    {Opcode::kEndif, "endif", 0, 0},
    {Opcode::kEndloop, "endloop", 0, 0},
    {Opcode::kEq, "eq", 1, 2},
    {Opcode::kFtoi, "ftoi", 1, 1},
    {Opcode::kFtou, "ftou", 1, 1},
    {Opcode::kGe, "ge", 1, 2},
    {Opcode::kIadd, "iadd", 1, 2},
    {Opcode::kIf, "if", 0, 1},
    {Opcode::kIeq, "ieq", 1, 2},
    {Opcode::kIge, "ige", 1, 2},
    {Opcode::kIlt, "ilt", 1, 2},
    {Opcode::kImad, "imad", 1, 3},
    {Opcode::kImax, "imax", 1, 2},
    {Opcode::kImin, "imin", 1, 2},
    {Opcode::kImul, "imul", 2, 2},
    {Opcode::kIne, "ine", 1, 2},
    {Opcode::kIneg, "ineg", 1, 1},
    {Opcode::kIshl, "ishl", 1, 2},
    {Opcode::kIshr, "ishr", 1, 2},
    {Opcode::kItof, "itof", 1, 1},
    {Opcode::kLoop, "loop", 0, 0},
    {Opcode::kLt, "lt", 1, 2},
    {Opcode::kMad, "mad", 1, 3},
    {Opcode::kMin, "min", 1, 2},
    {Opcode::kMax, "max", 1, 2},
    {Opcode::kMov, "mov", 1, 1},
    {Opcode::kMovc, "movc", 1, 3},
    {Opcode::kMul, "mul", 1, 2},
    {Opcode::kNe, "ne", 1, 2},
    {Opcode::kNot, "not", 1, 1},
    {Opcode::kOr, "or", 1, 2},
    {Opcode::kRet, "ret", 0, 0},
    {Opcode::kRetc, "retc", 0, 1},
    {Opcode::kRoundNe, "round_ne", 1, 1},
    {Opcode::kRoundNi, "round_ni", 1, 1},
    {Opcode::kRoundPi, "round_pi", 1, 1},
    {Opcode::kRoundZ, "round_z", 1, 1},
    {Opcode::kUdiv, "udiv", 2, 2},
    {Opcode::kUlt, "ult", 1, 2},
    {Opcode::kUge, "uge", 1, 2},
    {Opcode::kUmul, "umul", 2, 2},
    {Opcode::kUmad, "umad", 1, 3},
    {Opcode::kUmax, "umax", 1, 2},
    {Opcode::kUmin, "umin", 1, 2},
    {Opcode::kUshr, "ushr", 1, 2},
    {Opcode::kUtof, "utof", 1, 1},
    {Opcode::kXor, "xor", 1, 2},
    {Opcode::kDclConstantBuffer, "dcl_constantbuffer", 0, 0},
    {Opcode::kDclInput, "dcl_input", 0, 0},
    {Opcode::kDclTemps, "dcl_temps", 0, 0},
    {Opcode::kDclIndexableTemp, "dcl_indexableTemp", 0, 0},
    {Opcode::kDclGlobalFlags, "dcl_globalFlags", 0, 0},
    {Opcode::kF32tof16, "f32tof16", 1, 1},
    {Opcode::kF16tof32, "f16tof32", 1, 1},
    {Opcode::kUaddc, "uaddc", 2, 2},
    {Opcode::kUsubb, "usubb", 2, 2},
    {Opcode::kCountbits, "countbits", 1, 1},
    {Opcode::kFirstbitHi, "firstbit_hi", 1, 1},
    {Opcode::kFirstbitLo, "firstbit_lo", 1, 1},
    {Opcode::kUbfe, "ubfe", 1, 3},
    {Opcode::kIbfe, "ibfe", 1, 3},
    {Opcode::kBfi, "bfi", 1, 4},
    {Opcode::kBfrev, "bfrev", 1, 1},
    {Opcode::kDclThreadGroup, "dcl_thread_group", 0, 0},
    {Opcode::kDclUavRaw, "dcl_uav_raw", 0, 0},
    {Opcode::kDclTgsmRaw, "dcl_tgsm_raw", 0, 0},
    {Opcode::kDclTgsmStructured, "dcl_tgsm_structured", 0, 0},
    {Opcode::kDclResourceRaw, "dcl_resource_raw", 0, 0},
    {Opcode::kLdRaw, "ld_raw", 1, 2},
    {Opcode::kStoreRaw, "store_raw", 1, 2},
    {Opcode::kLdStructured, "ld_structured", 1, 3},
    {Opcode::kStoreStructured, "store_structured", 1, 3},
    {Opcode::kAtomicIadd, "atomic_iadd", 1, 2},
    {Opcode::kImmAtomicIadd, "imm_atomic_iadd", 2, 2},
    {Opcode::kImmAtomicExch, "imm_atomic_exch", 2, 2},
    {Opcode::kSync, "sync", 0, 0},
};

}  // namespace

const OpcodeInfo* FindOpcodeInfo(uint32_t opcode) {
  for (const OpcodeInfo& info : kOpcodes) {
    if (static_cast<uint32_t>(info.opcode) == opcode) return &info;
  }
  return nullptr;
}

}  // namespace dmlserve::dxbc
