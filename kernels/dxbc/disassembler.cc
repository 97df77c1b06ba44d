#include "kernels/dxbc/disassembler.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/dxbc/container.h"
#include "kernels/dxbc/token_format.h"

namespace dmlserve::dxbc {
namespace {

class Reader {
 public:
  explicit Reader(absl::Span<const uint32_t> tokens) : tokens_(tokens) {}
  bool done() const { return pos_ >= tokens_.size(); }
  bool Next(uint32_t* v) {
    if (done()) return false;
    *v = tokens_[pos_++];
    return true;
  }

 private:
  absl::Span<const uint32_t> tokens_;
  size_t pos_ = 0;
};

std::string Immediate(uint32_t v) {
  const int32_t s = static_cast<int32_t>(v);
  if (s > -65536 && s < 65536) return absl::StrCat(s);
  float f;
  std::memcpy(&f, &v, sizeof(f));
  return absl::StrFormat("0x%08x(%g)", v, f);
}

std::string RegisterName(uint32_t type) {
  switch (static_cast<OperandType>(type)) {
    case OperandType::kTemp:
      return "r";
    case OperandType::kIndexableTemp:
      return "x";
    case OperandType::kResource:
      return "t";
    case OperandType::kConstantBuffer:
      return "cb";
    case OperandType::kNull:
      return "null";
    case OperandType::kUav:
      return "u";
    case OperandType::kThreadGroupSharedMemory:
      return "g";
    case OperandType::kThreadId:
      return "vThreadID";
    case OperandType::kThreadGroupId:
      return "vThreadGroupID";
    case OperandType::kThreadIdInGroup:
      return "vThreadIDInGroup";
    case OperandType::kThreadIdInGroupFlattened:
      return "vThreadIDInGroupFlattened";
    default:
      return absl::StrCat("type", type, "_");
  }
}

// `components` (may be null) receives how many components the operand
// names when it is a destination: its write-mask bits, 1 for a scalar, 0 for
// null and immediates.
bool ReadOperand(Reader& in, std::string* out, int* components) {
  if (components != nullptr) *components = 0;
  uint32_t token;
  if (!in.Next(&token)) return false;
  std::string prefix, suffix;
  if (token & kOperandExtendedBit) {
    uint32_t ext;
    if (!in.Next(&ext)) return false;
    if (ext == kModifierNeg) prefix = "-";
    if (ext == kModifierAbs) prefix = "|", suffix = "|";
    if (ext == kModifierAbsNeg) prefix = "-|", suffix = "|";
  }
  const uint32_t type = (token >> kOperandTypeShift) & 0xff;
  const uint32_t num_components = token & 3;
  const uint32_t mode = (token >> kOperandSelectionModeShift) & 3;
  const uint32_t dims = (token >> kOperandIndexDimensionShift) & 3;
  std::string text = prefix;
  if (static_cast<OperandType>(type) == OperandType::kImmediate32) {
    const int n = num_components == 2 ? 4 : 1;
    text += "l(";
    for (int i = 0; i < n; ++i) {
      uint32_t v;
      if (!in.Next(&v)) return false;
      absl::StrAppend(&text, i ? ", " : "", Immediate(v));
    }
    *out = text + ")" + suffix;
    return true;
  }
  text += RegisterName(type);
  for (uint32_t d = 0; d < dims; ++d) {
    const uint32_t rep = (token >> (kOperandIndexRepresentationShift + 3 * d)) & 7;
    uint32_t index = 0;
    if (rep == kIndexImmediate32 || rep == kIndexImmediate32PlusRelative) {
      if (!in.Next(&index)) return false;
    }
    std::string relative;
    if (rep == kIndexRelative || rep == kIndexImmediate32PlusRelative) {
      if (!ReadOperand(in, &relative, nullptr)) return false;
    }
    if (d == 0) {
      absl::StrAppend(&text, index);
    } else if (relative.empty()) {
      absl::StrAppend(&text, "[", index, "]");
    } else {
      absl::StrAppend(&text, "[", relative, " + ", index, "]");
    }
  }
  if (components != nullptr && num_components == 1) *components = 1;
  if (num_components == 2) {
    const uint32_t bits = (token >> kOperandComponentsShift) & 0xff;
    if (components != nullptr && mode == kSelectionMask) {
      for (int i = 0; i < 4; ++i) *components += (bits >> i) & 1;
    }
    const char* xyzw = "xyzw";
    text += ".";
    if (mode == kSelectionMask) {
      for (int i = 0; i < 4; ++i) {
        if (bits & (1u << i)) text += xyzw[i];
      }
      if ((bits & 0xf) == 0) text.pop_back();
    } else if (mode == kSelectionSwizzle) {
      for (int i = 0; i < 4; ++i) text += xyzw[(bits >> (2 * i)) & 3];
    } else {
      text += xyzw[bits & 3];
    }
  }
  *out = text + suffix;
  return true;
}

std::string SyncName(uint32_t controls) {
  std::string name = "sync";
  if (controls & kSyncUavMemoryGlobal) name += "_uglobal";
  if (controls & kSyncUavMemoryGroup) name += "_ugroup";
  if (controls & kSyncGroupSharedMemory) name += "_g";
  if (controls & kSyncThreadsInGroup) name += "_t";
  return name;
}

}  // namespace

absl::StatusOr<std::vector<DisassembledInstruction>> DisassembleInstructions(
    absl::Span<const uint32_t> program) {
  if (program.size() < 2 || program[1] > program.size()) {
    return absl::InvalidArgumentError("truncated program");
  }
  std::vector<DisassembledInstruction> instructions;
  size_t pos = 2;
  const size_t end = program[1];
  while (pos < end) {
    const uint32_t token = program[pos];
    const uint32_t opcode = token & kOpcodeMask;
    const uint32_t length = (token >> kInstructionLengthShift) & kMaxInstructionLength;
    if (length == 0 || pos + length > end) {
      return absl::InvalidArgumentError(absl::StrCat("bad instruction length at token ", pos));
    }
    Reader in(program.subspan(pos + 1, length - 1));
    const OpcodeInfo* info = FindOpcodeInfo(opcode);
    const uint32_t controls = token & ~kOpcodeMask & ~(kMaxInstructionLength << 24);
    DisassembledInstruction instruction;
    instruction.opcode = opcode;
    std::string& name = instruction.name;
    name = info ? std::string(info->name) : absl::StrFormat("opcode_0x%02x", opcode);
    const Opcode op = static_cast<Opcode>(opcode);
    std::vector<std::string>& operands = instruction.operands;
    // Destinations come first (OpcodeInfo::num_dst of them).
    auto read_all = [&]() -> bool {
      const int destinations = info ? info->num_dst : 0;
      while (!in.done()) {
        std::string text;
        int components = 0;
        if (!ReadOperand(in, &text, &components)) return false;
        if (static_cast<int>(operands.size()) < destinations) {
          instruction.components_written += components;
        }
        operands.push_back(text);
      }
      return true;
    };
    bool ok = true;
    switch (op) {
      case Opcode::kDclTemps:
      case Opcode::kDclThreadGroup:
      case Opcode::kDclIndexableTemp: {
        uint32_t v;
        while (in.Next(&v)) operands.push_back(absl::StrCat(v));
        if (op == Opcode::kDclIndexableTemp && operands.size() == 3) {
          operands = {absl::StrCat("x", operands[0], "[", operands[1], "]"), operands[2]};
        }
        break;
      }
      case Opcode::kDclTgsmRaw: {
        std::string reg;
        uint32_t bytes = 0;
        ok = ReadOperand(in, &reg, nullptr) && in.Next(&bytes);
        operands = {reg, absl::StrCat(bytes)};
        break;
      }
      case Opcode::kDclTgsmStructured: {
        std::string reg;
        uint32_t stride = 0, count = 0;
        ok = ReadOperand(in, &reg, nullptr) && in.Next(&stride) && in.Next(&count);
        operands = {reg, absl::StrCat(stride), absl::StrCat(count)};
        break;
      }
      case Opcode::kDclConstantBuffer: {
        ok = read_all();
        if (ok && !operands.empty()) {
          operands[0] = operands[0].substr(0, operands[0].rfind('.'));
          operands.push_back(controls & kConstantBufferDynamicIndexed ? "dynamicIndexed"
                                                                      : "immediateIndexed");
        }
        break;
      }
      case Opcode::kDclGlobalFlags:
        if (controls & kGlobalFlagRefactoringAllowed) operands.push_back("refactoringAllowed");
        if (controls & kGlobalFlagEnableRawAndStructuredBuffers) {
          operands.push_back("enableRawAndStructuredBuffers");
        }
        break;
      case Opcode::kSync:
        name = SyncName(controls);
        break;
      case Opcode::kIf:
      case Opcode::kBreakc:
      case Opcode::kContinuec:
      case Opcode::kRetc:
        name += (controls & kTestNonZeroBit) ? "_nz" : "_z";
        ok = read_all();
        break;
      case Opcode::kDclUavRaw:
        if (controls & kUavGloballyCoherent) name += "_glc";
        ok = read_all();
        break;
      default:
        if (controls & kSaturateBit) name += "_sat";
        ok = read_all();
        break;
    }
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("bad operand at token ", pos));
    instructions.push_back(std::move(instruction));
    pos += length;
  }
  return instructions;
}

absl::StatusOr<std::string> Disassemble(absl::Span<const uint32_t> program) {
  absl::StatusOr<std::vector<DisassembledInstruction>> instructions =
      DisassembleInstructions(program);
  if (!instructions.ok()) return instructions.status();
  const uint32_t version = program[0];
  std::string out;
  absl::StrAppend(&out, (version >> 16) == 5 ? "cs" : absl::StrCat("type", version >> 16), "_",
                  (version >> 4) & 0xf, "_", version & 0xf, "\n");
  int depth = 0;
  for (const DisassembledInstruction& instruction : *instructions) {
    const Opcode op = static_cast<Opcode>(instruction.opcode);
    if (op == Opcode::kEndif || op == Opcode::kEndloop || op == Opcode::kElse) --depth;
    std::string line(2 * std::max(depth, 0), ' ');
    line += instruction.name;
    for (size_t i = 0; i < instruction.operands.size(); ++i) {
      absl::StrAppend(&line, i ? ", " : " ", instruction.operands[i]);
    }
    out += line + "\n";
    if (op == Opcode::kIf || op == Opcode::kLoop || op == Opcode::kElse) ++depth;
  }
  return out;
}

absl::StatusOr<std::string> DisassembleContainer(absl::Span<const uint8_t> blob) {
  absl::StatusOr<std::vector<uint32_t>> program = ExtractProgram(blob);
  if (!program.ok()) return program.status();
  return Disassemble(*program);
}

}  // namespace dmlserve::dxbc
