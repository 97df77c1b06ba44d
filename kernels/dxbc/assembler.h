#ifndef DMLSERVE_KERNELS_DXBC_ASSEMBLER_H_
#define DMLSERVE_KERNELS_DXBC_ASSEMBLER_H_

// An Xbyak-style builder for Shader Model 5.0 compute shaders (cs_5_0): each
// method appends one declaration or instruction, with the mnemonics fxc's
// disassembly uses, and Finish() returns a DXBC container with a valid
// checksum. Kernels derive from Assembler (or hold one) and call the methods
// directly:
//
//   class AddOne : public dxbc::Assembler {
//    public:
//     AddOne() {
//       dcl_resource_raw(0);
//       dcl_uav_raw(0);
//       dcl_input(vThreadID().x());
//       dcl_thread_group(64, 1, 1);
//       ishl(r(0).x(), vThreadID().x(), l(2));
//       ld_raw(r(0).y(), r(0).x(), t(0));
//       iadd(r(0).y(), r(0).y(), l(1));
//       store_raw(u(0).x(), r(0).x(), r(0).y());
//       ret();
//     }
//   };
//
// Names that are C++ keywords get a trailing underscore (and_, or_, xor_,
// not_, else_, break_, continue_). dcl_temps is emitted automatically from the
// highest r# used. Errors (bad operands, unbalanced control flow, undeclared
// registers) are recorded and returned by Finish(); the first one wins.

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/dxbc/operand.h"
#include "kernels/dxbc/token_format.h"

namespace dmlserve::dxbc {

class Assembler {
 public:
  Assembler() = default;
  virtual ~Assembler() = default;
  Assembler(const Assembler&) = delete;
  Assembler& operator=(const Assembler&) = delete;

  // ---- Operands.
  static Operand r(uint32_t n) { return Operand::Register(OperandType::kTemp, n); }
  static Operand x(uint32_t array, uint32_t index) {
    return Operand::Register2D(OperandType::kIndexableTemp, array, index);
  }
  static Operand x(uint32_t array, const Operand& relative, uint32_t offset = 0) {
    return Operand::Indexed(OperandType::kIndexableTemp, array, relative, offset);
  }
  static Operand cb(uint32_t slot, uint32_t index) {
    return Operand::Register2D(OperandType::kConstantBuffer, slot, index);
  }
  static Operand t(uint32_t n) { return Operand::Register(OperandType::kResource, n); }
  static Operand u(uint32_t n) { return Operand::Register(OperandType::kUav, n); }
  static Operand g(uint32_t n) {
    return Operand::Register(OperandType::kThreadGroupSharedMemory, n);
  }
  static Operand null() { return Operand::Special(OperandType::kNull); }
  static Operand vThreadID() { return Operand::Special(OperandType::kThreadId); }
  static Operand vThreadGroupID() { return Operand::Special(OperandType::kThreadGroupId); }
  static Operand vThreadIDInGroup() { return Operand::Special(OperandType::kThreadIdInGroup); }
  static Operand vThreadIDInGroupFlattened() {
    return Operand::Special(OperandType::kThreadIdInGroupFlattened);
  }
  static Operand l(int32_t v) { return Operand::Immediate(static_cast<uint32_t>(v)); }
  static Operand l(uint32_t v) { return Operand::Immediate(v); }
  static Operand l(int32_t x, int32_t y, int32_t z, int32_t w) {
    return Operand::Immediate4(static_cast<uint32_t>(x), static_cast<uint32_t>(y),
                               static_cast<uint32_t>(z), static_cast<uint32_t>(w));
  }
  static Operand lf(float v);
  static Operand lf(float x, float y, float z, float w);

  // ---- Declarations.
  void dcl_globalFlags(uint32_t flags);  // kGlobalFlag* bits
  void dcl_constantbuffer(uint32_t slot, uint32_t vec4_count, bool dynamic_indexed = false);
  void dcl_resource_raw(uint32_t n);
  void dcl_uav_raw(uint32_t n, bool globally_coherent = false);
  void dcl_tgsm_raw(uint32_t n, uint32_t byte_count);
  // g<n> as `count` structures of `stride` bytes (a multiple of 4, at most
  // 2048; stride * count at most 32768).
  void dcl_tgsm_structured(uint32_t n, uint32_t stride, uint32_t count);
  void dcl_input(const Operand& input);  // vThreadID.xyz, vThreadIDInGroupFlattened ...
  void dcl_temps(uint32_t count);        // optional: derived from the r# used
  void dcl_indexable_temp(uint32_t array, uint32_t size, uint32_t components);
  void dcl_thread_group(uint32_t x, uint32_t y, uint32_t z);

  // ---- Moves and integer arithmetic (wrapping, 32-bit).
  void mov(const Operand& d, const Operand& s) { Op(Opcode::kMov, {d}, {s}); }
  void movc(const Operand& d, const Operand& c, const Operand& a, const Operand& b) {
    Op(Opcode::kMovc, {d}, {c, a, b});
  }
  void iadd(const Operand& d, const Operand& a, const Operand& b) {
    Op(Opcode::kIadd, {d}, {a, b});
  }
  void ineg(const Operand& d, const Operand& a) { Op(Opcode::kIneg, {d}, {a}); }
  // imul/umul write the high 32 bits to `hi` (null() to drop) and the low to `lo`.
  void imul(const Operand& hi, const Operand& lo, const Operand& a, const Operand& b) {
    Op(Opcode::kImul, {hi, lo}, {a, b});
  }
  void imul(const Operand& lo, const Operand& a, const Operand& b) { imul(null(), lo, a, b); }
  void umul(const Operand& hi, const Operand& lo, const Operand& a, const Operand& b) {
    Op(Opcode::kUmul, {hi, lo}, {a, b});
  }
  void imad(const Operand& d, const Operand& a, const Operand& b, const Operand& c) {
    Op(Opcode::kImad, {d}, {a, b, c});
  }
  // Not implemented by vkd3d 1.2: use imad (same low 32 bits) in kernels.
  void umad(const Operand& d, const Operand& a, const Operand& b, const Operand& c) {
    Op(Opcode::kUmad, {d}, {a, b, c});
  }
  void udiv(const Operand& quotient, const Operand& remainder, const Operand& a, const Operand& b) {
    Op(Opcode::kUdiv, {quotient, remainder}, {a, b});
  }
  // Add with carry-out / subtract with borrow-out (SM5). Not implemented by
  // vkd3d 1.2; kernels that must run there compute the carry with ult.
  void uaddc(const Operand& sum, const Operand& carry, const Operand& a, const Operand& b) {
    Op(Opcode::kUaddc, {sum, carry}, {a, b});
  }
  void usubb(const Operand& diff, const Operand& borrow, const Operand& a, const Operand& b) {
    Op(Opcode::kUsubb, {diff, borrow}, {a, b});
  }
  void ishl(const Operand& d, const Operand& a, const Operand& b) {
    Op(Opcode::kIshl, {d}, {a, b});
  }
  void ushr(const Operand& d, const Operand& a, const Operand& b) {
    Op(Opcode::kUshr, {d}, {a, b});
  }
  void ishr(const Operand& d, const Operand& a, const Operand& b) {
    Op(Opcode::kIshr, {d}, {a, b});
  }
  void and_(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kAnd, {d}, {a, b}); }
  void or_(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kOr, {d}, {a, b}); }
  void xor_(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kXor, {d}, {a, b}); }
  void not_(const Operand& d, const Operand& a) { Op(Opcode::kNot, {d}, {a}); }
  void imin(const Operand& d, const Operand& a, const Operand& b) {
    Op(Opcode::kImin, {d}, {a, b});
  }
  void imax(const Operand& d, const Operand& a, const Operand& b) {
    Op(Opcode::kImax, {d}, {a, b});
  }
  void umin(const Operand& d, const Operand& a, const Operand& b) {
    Op(Opcode::kUmin, {d}, {a, b});
  }
  void umax(const Operand& d, const Operand& a, const Operand& b) {
    Op(Opcode::kUmax, {d}, {a, b});
  }
  // Bit fields: ubfe/ibfe extract `width` bits at `offset`; bfi inserts the
  // low `width` bits of `insert` into `base` at `offset`.
  void ubfe(const Operand& d, const Operand& width, const Operand& offset, const Operand& s) {
    Op(Opcode::kUbfe, {d}, {width, offset, s});
  }
  void ibfe(const Operand& d, const Operand& width, const Operand& offset, const Operand& s) {
    Op(Opcode::kIbfe, {d}, {width, offset, s});
  }
  void bfi(const Operand& d, const Operand& width, const Operand& offset, const Operand& insert,
           const Operand& base) {
    Op(Opcode::kBfi, {d}, {width, offset, insert, base});
  }

  // ---- Comparisons: write 0xffffffff (true) or 0.
  void ieq(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kIeq, {d}, {a, b}); }
  void ine(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kIne, {d}, {a, b}); }
  void ilt(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kIlt, {d}, {a, b}); }
  void ige(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kIge, {d}, {a, b}); }
  void ult(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kUlt, {d}, {a, b}); }
  void uge(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kUge, {d}, {a, b}); }
  void eq(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kEq, {d}, {a, b}); }
  void ne(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kNe, {d}, {a, b}); }
  void lt(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kLt, {d}, {a, b}); }
  void ge(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kGe, {d}, {a, b}); }

  // ---- Float arithmetic and conversions.
  void add(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kAdd, {d}, {a, b}); }
  void mul(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kMul, {d}, {a, b}); }
  void mad(const Operand& d, const Operand& a, const Operand& b, const Operand& c) {
    Op(Opcode::kMad, {d}, {a, b, c});
  }
  void div(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kDiv, {d}, {a, b}); }
  void min(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kMin, {d}, {a, b}); }
  void max(const Operand& d, const Operand& a, const Operand& b) { Op(Opcode::kMax, {d}, {a, b}); }
  void round_ne(const Operand& d, const Operand& a) { Op(Opcode::kRoundNe, {d}, {a}); }
  void round_ni(const Operand& d, const Operand& a) { Op(Opcode::kRoundNi, {d}, {a}); }
  void round_pi(const Operand& d, const Operand& a) { Op(Opcode::kRoundPi, {d}, {a}); }
  void round_z(const Operand& d, const Operand& a) { Op(Opcode::kRoundZ, {d}, {a}); }
  void ftoi(const Operand& d, const Operand& a) { Op(Opcode::kFtoi, {d}, {a}); }
  void ftou(const Operand& d, const Operand& a) { Op(Opcode::kFtou, {d}, {a}); }
  void itof(const Operand& d, const Operand& a) { Op(Opcode::kItof, {d}, {a}); }
  void utof(const Operand& d, const Operand& a) { Op(Opcode::kUtof, {d}, {a}); }
  // f16tof32 reads the low 16 bits; f32tof16 writes them (high bits zero).
  void f16tof32(const Operand& d, const Operand& a) { Op(Opcode::kF16tof32, {d}, {a}); }
  void f32tof16(const Operand& d, const Operand& a) { Op(Opcode::kF32tof16, {d}, {a}); }

  // ---- Memory. Raw (byte-address) buffers t#/u# and groupshared g#; the
  // address is a byte offset (multiple of 4). The destination mask (ld_raw)
  // or the u#/g# mask (store_raw) gives the number of consecutive dwords.
  // When the resource operand of ld_raw has no explicit swizzle, the one fxc
  // would write is derived from the destination mask (r0.zw <- t0.xxxy).
  void ld_raw(const Operand& d, const Operand& byte_offset, const Operand& resource);
  // Structured access: structure `index`, byte `offset` inside it (either an
  // immediate or a register; an immediate offset costs no instruction).
  // Loads select dwords as ld_raw does.
  void ld_structured(const Operand& d, const Operand& index, const Operand& offset,
                     const Operand& resource);
  void store_structured(const Operand& d, const Operand& index, const Operand& offset,
                        const Operand& value) {
    Op(Opcode::kStoreStructured, {d}, {index, offset, value});
  }
  void store_raw(const Operand& d, const Operand& byte_offset, const Operand& value) {
    Op(Opcode::kStoreRaw, {d}, {byte_offset, value});
  }
  void atomic_iadd(const Operand& d, const Operand& byte_offset, const Operand& value) {
    Op(Opcode::kAtomicIadd, {d}, {byte_offset, value});
  }
  void imm_atomic_iadd(const Operand& original, const Operand& d, const Operand& byte_offset,
                       const Operand& value) {
    Op(Opcode::kImmAtomicIadd, {original, d}, {byte_offset, value});
  }
  void imm_atomic_exch(const Operand& original, const Operand& d, const Operand& byte_offset,
                       const Operand& value) {
    Op(Opcode::kImmAtomicExch, {original, d}, {byte_offset, value});
  }

  // ---- Control flow (structured; checked for balance).
  void if_nz(const Operand& c) { Flow(Opcode::kIf, kTestNonZeroBit, c); }
  void if_z(const Operand& c) { Flow(Opcode::kIf, 0, c); }
  void else_();
  void endif();
  void loop();
  void endloop();
  void break_();
  void breakc_nz(const Operand& c) { Flow(Opcode::kBreakc, kTestNonZeroBit, c); }
  void breakc_z(const Operand& c) { Flow(Opcode::kBreakc, 0, c); }
  void continue_();
  void continuec_nz(const Operand& c) { Flow(Opcode::kContinuec, kTestNonZeroBit, c); }
  void continuec_z(const Operand& c) { Flow(Opcode::kContinuec, 0, c); }
  void ret();
  void retc_nz(const Operand& c) { Flow(Opcode::kRetc, kTestNonZeroBit, c); }
  void retc_z(const Operand& c) { Flow(Opcode::kRetc, 0, c); }

  // ---- Barriers. _t: all threads of the group arrive; _g: groupshared
  // writes visible to the group; _uglobal: UAV writes visible device-wide.
  void sync_g_t() { Sync(kSyncThreadsInGroup | kSyncGroupSharedMemory); }
  void sync_g() { Sync(kSyncGroupSharedMemory); }
  void sync_uglobal_g_t() {
    Sync(kSyncThreadsInGroup | kSyncGroupSharedMemory | kSyncUavMemoryGlobal);
  }
  void sync_ugroup_g_t() {
    Sync(kSyncThreadsInGroup | kSyncGroupSharedMemory | kSyncUavMemoryGroup);
  }
  void sync(uint32_t flags) { Sync(flags); }

  // A temp register no instruction has used yet (for helpers that need
  // scratch space without knowing the kernel's register plan).
  uint32_t NewTemp() {
    next_free_temp_ = std::max(next_free_temp_, used_temps_) + 1;
    return next_free_temp_ - 1;
  }
  // Reserve temps [0, n) for hand-numbered use: NewTemp() starts above them.
  void ReserveTemps(uint32_t n) {
    if (next_free_temp_ < n) next_free_temp_ = n;
  }

  // The program tokens (version, length, declarations, instructions).
  absl::StatusOr<std::vector<uint32_t>> Program();
  // The DXBC container with checksum.
  absl::StatusOr<std::vector<uint8_t>> Finish();

  // What has been emitted so far (for encoding tests).
  absl::Span<const uint32_t> declaration_tokens() const { return declarations_; }
  absl::Span<const uint32_t> instruction_tokens() const { return code_; }
  const absl::Status& status() const { return status_; }

 protected:
  // Any instruction by opcode (for opcodes without a named method).
  void Op(Opcode opcode, std::initializer_list<Operand> dsts, std::initializer_list<Operand> srcs,
          uint32_t controls = 0);

 private:
  enum class Block { kIf, kElse, kLoop };

  void Flow(Opcode opcode, uint32_t controls, const Operand& condition);
  void Sync(uint32_t flags);
  void Declare(Opcode opcode, uint32_t controls, std::initializer_list<Operand> operands,
               std::initializer_list<uint32_t> values);
  void DeclareTokens(Opcode opcode, uint32_t controls, std::vector<uint32_t> body);
  void Fail(absl::string_view what);
  std::string DwordSwizzle(const Operand& d, absl::string_view instruction);
  absl::Status CheckUse(const Operand& op, bool is_destination);
  bool InLoop() const;

  std::vector<uint32_t> declarations_;
  std::vector<uint32_t> code_;
  std::vector<Block> blocks_;
  absl::Status status_;
  uint32_t declared_temps_ = 0;
  bool temps_declared_ = false;
  uint32_t used_temps_ = 0;  // highest r# used + 1
  uint32_t next_free_temp_ = 0;
  bool thread_group_declared_ = false;
  bool last_was_ret_ = false;
  std::set<std::pair<OperandType, uint32_t>> declared_;
  std::set<OperandType> declared_inputs_;
};

}  // namespace dmlserve::dxbc

#endif  // DMLSERVE_KERNELS_DXBC_ASSEMBLER_H_
