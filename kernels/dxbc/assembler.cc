#include "kernels/dxbc/assembler.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/dxbc/container.h"

namespace dmlserve::dxbc {
namespace {

uint32_t FloatBits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  return bits;
}

absl::string_view OpcodeName(Opcode opcode) {
  const OpcodeInfo* info = FindOpcodeInfo(static_cast<uint32_t>(opcode));
  return info ? info->name : absl::string_view("?");
}

bool NeedsDeclaration(OperandType type) {
  switch (type) {
    case OperandType::kResource:
    case OperandType::kUav:
    case OperandType::kThreadGroupSharedMemory:
    case OperandType::kConstantBuffer:
    case OperandType::kIndexableTemp:
      return true;
    default:
      return false;
  }
}

bool IsInput(OperandType type) {
  switch (type) {
    case OperandType::kThreadId:
    case OperandType::kThreadGroupId:
    case OperandType::kThreadIdInGroup:
    case OperandType::kThreadIdInGroupFlattened:
      return true;
    default:
      return false;
  }
}

// Resource declarations carry a 0-component operand (no mask).
uint32_t DeclarationOperandToken(OperandType type) {
  return (static_cast<uint32_t>(type) << kOperandTypeShift) | (1u << kOperandIndexDimensionShift);
}

}  // namespace

Operand Assembler::lf(float v) { return Operand::Immediate(FloatBits(v)); }

Operand Assembler::lf(float x, float y, float z, float w) {
  return Operand::Immediate4(FloatBits(x), FloatBits(y), FloatBits(z), FloatBits(w));
}

void Assembler::Fail(absl::string_view what) {
  if (status_.ok()) {
    status_ = absl::InvalidArgumentError(
        absl::StrCat("dxbc assembler, instruction token ", code_.size(), ": ", what));
  }
}

absl::Status Assembler::CheckUse(const Operand& op, bool is_destination) {
  if (!op.valid()) return absl::InvalidArgumentError("uninitialised operand");
  if (op.type() == OperandType::kTemp) {
    used_temps_ = std::max(used_temps_, op.index(0) + 1);
  }
  if (op.relative() != nullptr) {
    absl::Status s = CheckUse(*op.relative(), false);
    if (!s.ok()) return s;
  }
  if (NeedsDeclaration(op.type()) && !declared_.count({op.type(), op.index(0)})) {
    return absl::InvalidArgumentError(absl::StrCat("register type ", static_cast<int>(op.type()),
                                                   " #", op.index(0), " used but not declared"));
  }
  if (IsInput(op.type()) && !declared_inputs_.count(op.type())) {
    return absl::InvalidArgumentError("thread-ID input used but not declared with dcl_input");
  }
  if (is_destination && (op.is_immediate() || op.type() == OperandType::kResource ||
                         op.type() == OperandType::kConstantBuffer || IsInput(op.type()))) {
    return absl::InvalidArgumentError("read-only register used as a destination");
  }
  return absl::OkStatus();
}

void Assembler::Op(Opcode opcode, std::initializer_list<Operand> dsts,
                   std::initializer_list<Operand> srcs, uint32_t controls) {
  if (!status_.ok()) return;
  // Anything outside the controls field would overwrite the instruction
  // length (a corrupt program that still assembled; found by dxbc_fuzzer).
  if ((controls & ~kControlsMask) != 0) {
    return Fail(absl::StrCat(OpcodeName(opcode), ": controls 0x", absl::StrFormat("%x", controls),
                             " outside bits 11-23 of the opcode token"));
  }
  std::vector<uint32_t> body;
  for (const Operand& d : dsts) {
    absl::Status s = CheckUse(d, true);
    if (s.ok()) s = d.Encode(true, &body);
    if (!s.ok()) return Fail(absl::StrCat(OpcodeName(opcode), " destination: ", s.message()));
  }
  for (const Operand& src : srcs) {
    absl::Status s = CheckUse(src, false);
    if (s.ok()) s = src.Encode(false, &body);
    if (!s.ok()) return Fail(absl::StrCat(OpcodeName(opcode), " source: ", s.message()));
  }
  const uint32_t length = static_cast<uint32_t>(body.size()) + 1;
  if (length > kMaxInstructionLength) return Fail("instruction too long");
  code_.push_back(static_cast<uint32_t>(opcode) | controls | (length << kInstructionLengthShift));
  code_.insert(code_.end(), body.begin(), body.end());
  last_was_ret_ = opcode == Opcode::kRet && blocks_.empty();
}

void Assembler::Declare(Opcode opcode, uint32_t controls, std::initializer_list<Operand> operands,
                        std::initializer_list<uint32_t> values) {
  std::vector<uint32_t> body;
  for (const Operand& op : operands) {
    absl::Status s = op.Encode(/*is_destination=*/true, &body);
    if (!s.ok()) return Fail(absl::StrCat(OpcodeName(opcode), ": ", s.message()));
  }
  body.insert(body.end(), values.begin(), values.end());
  DeclareTokens(opcode, controls, std::move(body));
}

void Assembler::dcl_globalFlags(uint32_t flags) { Declare(Opcode::kDclGlobalFlags, flags, {}, {}); }

void Assembler::DeclareTokens(Opcode opcode, uint32_t controls, std::vector<uint32_t> body) {
  if (!status_.ok()) return;
  if (!code_.empty()) return Fail("declaration after the first instruction");
  if ((controls & ~kControlsMask) != 0) {
    return Fail(absl::StrCat(OpcodeName(opcode), ": controls 0x", absl::StrFormat("%x", controls),
                             " outside bits 11-23 of the opcode token"));
  }
  declarations_.push_back(static_cast<uint32_t>(opcode) | controls |
                          ((static_cast<uint32_t>(body.size()) + 1) << kInstructionLengthShift));
  declarations_.insert(declarations_.end(), body.begin(), body.end());
}

void Assembler::dcl_constantbuffer(uint32_t slot, uint32_t vec4_count, bool dynamic_indexed) {
  // The declaration names the buffer as cb#[size] with an xyzw swizzle.
  std::vector<uint32_t> body;
  absl::Status s = cb(slot, vec4_count).Encode(/*is_destination=*/false, &body);
  if (!s.ok()) return Fail(s.message());
  DeclareTokens(Opcode::kDclConstantBuffer, dynamic_indexed ? kConstantBufferDynamicIndexed : 0,
                std::move(body));
  declared_.insert({OperandType::kConstantBuffer, slot});
}

void Assembler::dcl_resource_raw(uint32_t n) {
  DeclareTokens(Opcode::kDclResourceRaw, 0, {DeclarationOperandToken(OperandType::kResource), n});
  declared_.insert({OperandType::kResource, n});
}

void Assembler::dcl_uav_raw(uint32_t n, bool globally_coherent) {
  DeclareTokens(Opcode::kDclUavRaw, globally_coherent ? kUavGloballyCoherent : 0,
                {DeclarationOperandToken(OperandType::kUav), n});
  declared_.insert({OperandType::kUav, n});
}

void Assembler::dcl_tgsm_raw(uint32_t n, uint32_t byte_count) {
  if (byte_count == 0 || byte_count % 4 != 0 || byte_count > 32768) {
    return Fail("dcl_tgsm_raw: byte count must be a non-zero multiple of 4, at most 32768");
  }
  DeclareTokens(Opcode::kDclTgsmRaw, 0,
                {DeclarationOperandToken(OperandType::kThreadGroupSharedMemory), n, byte_count});
  declared_.insert({OperandType::kThreadGroupSharedMemory, n});
}

void Assembler::dcl_tgsm_structured(uint32_t n, uint32_t stride, uint32_t count) {
  if (stride == 0 || stride % 4 != 0 || stride > 2048 || count == 0 ||
      uint64_t{stride} * count > 32768) {
    return Fail(
        "dcl_tgsm_structured: stride must be a non-zero multiple of 4 up to 2048, and stride * "
        "count at most 32768");
  }
  DeclareTokens(Opcode::kDclTgsmStructured, 0,
                {DeclarationOperandToken(OperandType::kThreadGroupSharedMemory), n, stride, count});
  declared_.insert({OperandType::kThreadGroupSharedMemory, n});
}

void Assembler::dcl_input(const Operand& input) {
  if (!IsInput(input.type())) return Fail("dcl_input: only thread-ID inputs are supported");
  if (input.type() == OperandType::kThreadIdInGroupFlattened) {
    // A scalar system value: declared with a 0-component operand.
    DeclareTokens(
        Opcode::kDclInput, 0,
        {static_cast<uint32_t>(OperandType::kThreadIdInGroupFlattened) << kOperandTypeShift});
  } else {
    Declare(Opcode::kDclInput, 0, {input}, {});
  }
  declared_inputs_.insert(input.type());
}

void Assembler::dcl_temps(uint32_t count) {
  if (temps_declared_) return Fail("dcl_temps declared twice");
  Declare(Opcode::kDclTemps, 0, {}, {count});
  temps_declared_ = true;
  declared_temps_ = count;
}

void Assembler::dcl_indexable_temp(uint32_t array, uint32_t size, uint32_t components) {
  if (components < 1 || components > 4) return Fail("dcl_indexableTemp: 1 to 4 components");
  Declare(Opcode::kDclIndexableTemp, 0, {}, {array, size, components});
  declared_.insert({OperandType::kIndexableTemp, array});
}

void Assembler::dcl_thread_group(uint32_t x, uint32_t y, uint32_t z) {
  if (x == 0 || y == 0 || z == 0 || x > 1024 || y > 1024 || z > 64 || x * y * z > 1024) {
    return Fail("dcl_thread_group: invalid size (cs_5_0: x,y <= 1024, z <= 64, x*y*z <= 1024)");
  }
  Declare(Opcode::kDclThreadGroup, 0, {}, {x, y, z});
  thread_group_declared_ = true;
}

// The k-th written component of `d` reads dword k: r0.yw <- t0.xxxy. Empty
// when `d`'s write mask is malformed.
std::string Assembler::DwordSwizzle(const Operand& d, absl::string_view instruction) {
  uint32_t mask = 0xf;
  if (!d.components().empty() && !ParseWriteMask(d.components(), &mask)) {
    Fail(absl::StrCat(instruction, ": bad write mask '", d.components(), "'"));
    return "";
  }
  std::string swizzle;
  int k = 0;
  char current = 'x';
  for (int i = 0; i < 4; ++i) {
    if (mask & (1u << i)) current = "xyzw"[k++];
    swizzle += current;
  }
  return swizzle;
}

void Assembler::ld_raw(const Operand& d, const Operand& byte_offset, const Operand& resource) {
  if (!resource.components().empty()) {
    return Op(Opcode::kLdRaw, {d}, {byte_offset, resource});
  }
  const std::string swizzle = DwordSwizzle(d, "ld_raw");
  if (swizzle.empty()) return;
  Op(Opcode::kLdRaw, {d}, {byte_offset, resource.sel(swizzle)});
}

void Assembler::ld_structured(const Operand& d, const Operand& index, const Operand& offset,
                              const Operand& resource) {
  if (!resource.components().empty()) {
    return Op(Opcode::kLdStructured, {d}, {index, offset, resource});
  }
  const std::string swizzle = DwordSwizzle(d, "ld_structured");
  if (swizzle.empty()) return;
  Op(Opcode::kLdStructured, {d}, {index, offset, resource.sel(swizzle)});
}

void Assembler::Flow(Opcode opcode, uint32_t controls, const Operand& condition) {
  if (!status_.ok()) return;
  if ((opcode == Opcode::kBreakc || opcode == Opcode::kContinuec) && !InLoop()) {
    return Fail(absl::StrCat(OpcodeName(opcode), " outside a loop"));
  }
  Operand c = condition;
  if (c.components().empty() && c.register_components() == 4) {
    return Fail(absl::StrCat(OpcodeName(opcode), ": condition must select one component"));
  }
  Op(opcode, {}, {c}, controls);
  if (opcode == Opcode::kIf) blocks_.push_back(Block::kIf);
}

void Assembler::else_() {
  if (!status_.ok()) return;
  if (blocks_.empty() || blocks_.back() != Block::kIf) return Fail("else without if");
  blocks_.back() = Block::kElse;
  Op(Opcode::kElse, {}, {});
}

void Assembler::endif() {
  if (!status_.ok()) return;
  if (blocks_.empty() || blocks_.back() == Block::kLoop) return Fail("endif without if");
  blocks_.pop_back();
  Op(Opcode::kEndif, {}, {});
}

void Assembler::loop() {
  if (!status_.ok()) return;
  Op(Opcode::kLoop, {}, {});
  blocks_.push_back(Block::kLoop);
}

void Assembler::endloop() {
  if (!status_.ok()) return;
  if (blocks_.empty() || blocks_.back() != Block::kLoop) return Fail("endloop without loop");
  blocks_.pop_back();
  Op(Opcode::kEndloop, {}, {});
}

void Assembler::break_() {
  if (!InLoop()) return Fail("break outside a loop");
  Op(Opcode::kBreak, {}, {});
}

void Assembler::continue_() {
  if (!InLoop()) return Fail("continue outside a loop");
  Op(Opcode::kContinue, {}, {});
}

void Assembler::ret() { Op(Opcode::kRet, {}, {}); }

void Assembler::Sync(uint32_t flags) { Op(Opcode::kSync, {}, {}, flags); }

bool Assembler::InLoop() const {
  return std::find(blocks_.begin(), blocks_.end(), Block::kLoop) != blocks_.end();
}

absl::StatusOr<std::vector<uint32_t>> Assembler::Program() {
  if (!status_.ok()) return status_;
  if (!blocks_.empty()) return absl::InvalidArgumentError("dxbc assembler: unclosed if/loop");
  if (!thread_group_declared_) {
    return absl::InvalidArgumentError("dxbc assembler: no dcl_thread_group");
  }
  if (temps_declared_ && declared_temps_ < used_temps_) {
    return absl::InvalidArgumentError(absl::StrCat("dxbc assembler: dcl_temps ", declared_temps_,
                                                   " but r", used_temps_ - 1, " is used"));
  }
  std::vector<uint32_t> program = {kComputeShader50Version, 0};
  program.insert(program.end(), declarations_.begin(), declarations_.end());
  if (!temps_declared_ && used_temps_ > 0) {
    program.push_back(static_cast<uint32_t>(Opcode::kDclTemps) | (2u << kInstructionLengthShift));
    program.push_back(used_temps_);
  }
  program.insert(program.end(), code_.begin(), code_.end());
  if (!last_was_ret_) {
    program.push_back(static_cast<uint32_t>(Opcode::kRet) | (1u << kInstructionLengthShift));
  }
  program[1] = static_cast<uint32_t>(program.size());
  return program;
}

absl::StatusOr<std::vector<uint8_t>> Assembler::Finish() {
  absl::StatusOr<std::vector<uint32_t>> program = Program();
  if (!program.ok()) return program.status();
  return BuildDxbcContainer(*program);
}

}  // namespace dmlserve::dxbc
