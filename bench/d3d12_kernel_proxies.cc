#include "bench/d3d12_kernel_proxies.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kernels/dxbc/container.h"
#include "kernels/dxbc/disassembler.h"
#include "kernels/dxbc/token_format.h"

namespace dmlserve::bench {
namespace {

using dxbc::DisassembledInstruction;
using dxbc::Opcode;
using Vec4 = std::array<uint32_t, 4>;

absl::StatusOr<std::vector<DisassembledInstruction>> Decode(const std::vector<uint8_t>& dxbc) {
  absl::StatusOr<std::vector<uint32_t>> program = dxbc::ExtractProgram(dxbc);
  if (!program.ok()) return program.status();
  return dxbc::DisassembleInstructions(*program);
}

Opcode OpOf(const DisassembledInstruction& instruction) {
  return static_cast<Opcode>(instruction.opcode);
}

bool IsMemoryAccess(Opcode op) {
  return op == Opcode::kLdRaw || op == Opcode::kStoreRaw || op == Opcode::kLdStructured ||
         op == Opcode::kStoreStructured || op == Opcode::kAtomicIadd ||
         op == Opcode::kImmAtomicIadd || op == Opcode::kImmAtomicExch;
}

// "t0.xxxx" -> "t0".
absl::string_view RegisterOf(absl::string_view operand) {
  return operand.substr(0, operand.find('.'));
}

// For each if/else/loop the index of its else/endif/endloop, for each
// endloop its loop, and for each instruction the innermost loop around it
// (-1 outside every loop).
struct Structure {
  std::vector<int> match;
  std::vector<int> enclosing_loop;
};

absl::StatusOr<Structure> MatchBlocks(const std::vector<DisassembledInstruction>& code) {
  Structure s;
  s.match.assign(code.size(), -1);
  s.enclosing_loop.assign(code.size(), -1);
  std::vector<int> open, loops;
  for (int i = 0; i < static_cast<int>(code.size()); ++i) {
    s.enclosing_loop[i] = loops.empty() ? -1 : loops.back();
    const Opcode op = OpOf(code[i]);
    if (op == Opcode::kElse || op == Opcode::kEndif || op == Opcode::kEndloop) {
      if (open.empty()) return absl::InvalidArgumentError(absl::StrCat("unmatched ", code[i].name));
      s.match[open.back()] = i;
      if (op == Opcode::kEndloop) {
        s.match[i] = open.back();
        loops.pop_back();
      }
      open.pop_back();
    }
    if (op == Opcode::kIf || op == Opcode::kElse || op == Opcode::kLoop) open.push_back(i);
    if (op == Opcode::kLoop) loops.push_back(i);
  }
  if (!open.empty()) return absl::InvalidArgumentError("unclosed if or loop");
  return s;
}

// One thread's registers and inputs, and the operands of the listing.
class Lane {
 public:
  Lane(const std::array<uint32_t, d3d12::kRootConstantCount>& constants, Vec4 thread_in_group,
       uint32_t flattened)
      : thread_in_group_(thread_in_group), flattened_(flattened) {
    for (int i = 0; i < d3d12::kRootConstantCount; ++i) constants_[i / 4][i % 4] = constants[i];
  }

  absl::StatusOr<Vec4> Read(absl::string_view text) const {
    const bool negate = absl::ConsumePrefix(&text, "-");
    Vec4 v{};
    if (absl::ConsumePrefix(&text, "l(") && absl::ConsumeSuffix(&text, ")")) {
      const std::vector<absl::string_view> parts = absl::StrSplit(text, ", ");
      for (size_t i = 0; i < 4; ++i) {
        absl::StatusOr<uint32_t> value = Immediate(parts[std::min(i, parts.size() - 1)]);
        if (!value.ok()) return value.status();
        v[i] = *value;
      }
    } else {
      const size_t dot = text.find('.');
      absl::StatusOr<Vec4> source = Register(text.substr(0, dot));
      if (!source.ok()) return source.status();
      const absl::string_view swizzle = dot == text.npos ? "xyzw" : text.substr(dot + 1);
      for (size_t i = 0; i < 4; ++i) {
        v[i] = (*source)[Component(swizzle[std::min(i, swizzle.size() - 1)])];
      }
    }
    if (negate) {
      for (uint32_t& c : v) c = 0u - c;
    }
    return v;
  }

  // Writes the components of `value` that `text`'s write mask names.
  absl::Status Write(absl::string_view text, const Vec4& value) {
    if (text == "null") return absl::OkStatus();
    absl::string_view name = text.substr(0, text.find('.'));
    int index;
    if (name.size() == text.size() || !absl::ConsumePrefix(&name, "r") ||
        !absl::SimpleAtoi(name, &index)) {
      return absl::UnimplementedError(absl::StrCat("writes to ", text));
    }
    Vec4& temp = temps_[index];
    for (char c : text.substr(text.find('.') + 1)) temp[Component(c)] = value[Component(c)];
    return absl::OkStatus();
  }

 private:
  static int Component(char c) { return c == 'w' ? 3 : c == 'z' ? 2 : c == 'y' ? 1 : 0; }

  static absl::StatusOr<uint32_t> Immediate(absl::string_view text) {
    int32_t value;
    if (absl::SimpleAtoi(text, &value)) return static_cast<uint32_t>(value);
    // Large values print as 0x%08x(%g).
    if (absl::StartsWith(text, "0x")) {
      return static_cast<uint32_t>(std::strtoul(std::string(text).c_str(), nullptr, 16));
    }
    return absl::InvalidArgumentError(absl::StrCat("immediate ", text));
  }

  absl::StatusOr<Vec4> Register(absl::string_view name) const {
    int index;
    if (name == "vThreadIDInGroupFlattened") return Vec4{flattened_, 0, 0, 0};
    if (name == "vThreadIDInGroup") return thread_in_group_;
    if (name == "vThreadGroupID") return Vec4{};  // group (0, 0, 0)
    if (absl::ConsumePrefix(&name, "cb0[") && absl::ConsumeSuffix(&name, "]") &&
        absl::SimpleAtoi(name, &index) && index >= 0 && index < kConstantVectors) {
      return constants_[index];
    }
    if (absl::ConsumePrefix(&name, "r") && absl::SimpleAtoi(name, &index)) {
      auto it = temps_.find(index);
      return it == temps_.end() ? Vec4{} : it->second;
    }
    return absl::UnimplementedError(absl::StrCat("reads from ", name));
  }

  // cb0[i]: root constants 4i .. 4i + 3.
  static constexpr int kConstantVectors = (d3d12::kRootConstantCount + 3) / 4;
  Vec4 constants_[kConstantVectors] = {};
  Vec4 thread_in_group_;
  uint32_t flattened_;
  std::map<int, Vec4> temps_;
};

// dst = f(a, b, c) component-wise, for the integer ALU instructions.
absl::StatusOr<uint32_t> Alu(Opcode op, uint32_t a, uint32_t b, uint32_t c) {
  const int32_t sa = static_cast<int32_t>(a), sb = static_cast<int32_t>(b);
  const uint32_t all = ~0u;
  switch (op) {
    case Opcode::kMov:
      return a;
    case Opcode::kMovc:
      return a != 0 ? b : c;
    case Opcode::kIadd:
      return a + b;
    case Opcode::kImad:
    case Opcode::kUmad:
      return a * b + c;
    case Opcode::kIneg:
      return 0u - a;
    case Opcode::kIshl:
      return a << (b & 31);
    case Opcode::kUshr:
      return a >> (b & 31);
    case Opcode::kIshr:
      return static_cast<uint32_t>(sa >> (b & 31));
    case Opcode::kAnd:
      return a & b;
    case Opcode::kOr:
      return a | b;
    case Opcode::kXor:
      return a ^ b;
    case Opcode::kNot:
      return ~a;
    case Opcode::kUlt:
      return a < b ? all : 0;
    case Opcode::kUge:
      return a >= b ? all : 0;
    case Opcode::kIlt:
      return sa < sb ? all : 0;
    case Opcode::kIge:
      return sa >= sb ? all : 0;
    case Opcode::kIeq:
      return a == b ? all : 0;
    case Opcode::kIne:
      return a != b ? all : 0;
    case Opcode::kUmin:
      return std::min(a, b);
    case Opcode::kUmax:
      return std::max(a, b);
    case Opcode::kImin:
      return static_cast<uint32_t>(std::min(sa, sb));
    case Opcode::kImax:
      return static_cast<uint32_t>(std::max(sa, sb));
    default:
      return absl::UnimplementedError("not an integer ALU instruction");
  }
}

// Runs one lane to its first load from `resource`.
absl::StatusOr<LaneLoad> RunLane(const std::vector<DisassembledInstruction>& code,
                                 const Structure& blocks, Lane& lane, absl::string_view resource) {
  constexpr int kMaxSteps = 1 << 22;
  int pc = 0;
  for (int steps = 0; steps < kMaxSteps && pc < static_cast<int>(code.size()); ++steps) {
    const DisassembledInstruction& in = code[pc];
    const std::vector<std::string>& ops = in.operands;
    const Opcode op = OpOf(in);
    auto condition = [&]() -> absl::StatusOr<bool> {
      absl::StatusOr<Vec4> v = lane.Read(ops[0]);
      if (!v.ok()) return v.status();
      return ((*v)[0] != 0) == absl::EndsWith(in.name, "_nz");
    };
    switch (op) {
      case Opcode::kIf: {
        absl::StatusOr<bool> taken = condition();
        if (!taken.ok()) return taken.status();
        pc = *taken ? pc + 1 : blocks.match[pc] + 1;
        continue;
      }
      case Opcode::kElse:  // the if-branch ran: skip the else-branch
        pc = blocks.match[pc] + 1;
        continue;
      case Opcode::kEndloop:
        pc = blocks.match[pc] + 1;
        continue;
      case Opcode::kBreak:
      case Opcode::kBreakc: {
        bool taken = true;
        if (op == Opcode::kBreakc) {
          absl::StatusOr<bool> c = condition();
          if (!c.ok()) return c.status();
          taken = *c;
        }
        pc = taken ? blocks.match[blocks.enclosing_loop[pc]] + 1 : pc + 1;
        continue;
      }
      case Opcode::kRet:
        return LaneLoad{};
      case Opcode::kLdRaw: {
        absl::StatusOr<Vec4> address = lane.Read(ops[1]);
        if (!address.ok()) return address.status();
        if (RegisterOf(ops[2]) == resource) {
          return LaneLoad{true, (*address)[0], 4u * static_cast<uint32_t>(in.components_written)};
        }
        if (absl::Status s = lane.Write(ops[0], Vec4{}); !s.ok()) return s;
        break;
      }
      case Opcode::kImul:
      case Opcode::kUmul:
      case Opcode::kUdiv: {  // two destinations: (hi, lo) or (quotient, remainder)
        absl::StatusOr<Vec4> a = lane.Read(ops[2]), b = lane.Read(ops[3]);
        if (!a.ok()) return a.status();
        if (!b.ok()) return b.status();
        Vec4 first{}, second{};
        for (int i = 0; i < 4; ++i) {
          const uint64_t x = (*a)[i], y = (*b)[i];
          if (op == Opcode::kUdiv) {
            first[i] = y == 0 ? ~0u : static_cast<uint32_t>(x / y);
            second[i] = y == 0 ? ~0u : static_cast<uint32_t>(x % y);
          } else {
            const uint64_t p = op == Opcode::kUmul
                                   ? x * y
                                   : static_cast<uint64_t>(int64_t{static_cast<int32_t>((*a)[i])} *
                                                           int64_t{static_cast<int32_t>((*b)[i])});
            first[i] = static_cast<uint32_t>(p >> 32);
            second[i] = static_cast<uint32_t>(p);
          }
        }
        if (absl::Status s = lane.Write(ops[0], first); !s.ok()) return s;
        if (absl::Status s = lane.Write(ops[1], second); !s.ok()) return s;
        break;
      }
      default: {
        if (op == Opcode::kLdStructured) {  // groupshared only: reads 0
          if (absl::Status s = lane.Write(ops[0], Vec4{}); !s.ok()) return s;
          break;
        }
        if (op == Opcode::kLoop || op == Opcode::kEndif || op == Opcode::kStoreRaw ||
            op == Opcode::kStoreStructured || op == Opcode::kSync ||
            absl::StartsWith(in.name, "dcl_")) {
          break;
        }
        if (ops.empty() || ops.size() > 4) {
          return absl::UnimplementedError(absl::StrCat("cannot interpret ", in.name));
        }
        Vec4 sources[3] = {};
        for (size_t i = 1; i < ops.size(); ++i) {
          absl::StatusOr<Vec4> v = lane.Read(ops[i]);
          if (!v.ok()) return v.status();
          sources[i - 1] = *v;
        }
        Vec4 result{};
        for (int c = 0; c < 4; ++c) {
          absl::StatusOr<uint32_t> r = Alu(op, sources[0][c], sources[1][c], sources[2][c]);
          if (!r.ok()) return absl::UnimplementedError(absl::StrCat("cannot interpret ", in.name));
          result[c] = *r;
        }
        if (absl::Status s = lane.Write(ops[0], result); !s.ok()) return s;
        break;
      }
    }
    ++pc;
  }
  if (pc < static_cast<int>(code.size())) {
    return absl::DeadlineExceededError("a lane ran too long before its first load");
  }
  return LaneLoad{};
}

}  // namespace

absl::StatusOr<InnerLoopWork> MeasureInnerMadLoop(const std::vector<uint8_t>& dxbc) {
  absl::StatusOr<std::vector<DisassembledInstruction>> code = Decode(dxbc);
  if (!code.ok()) return code.status();
  struct Frame {
    size_t start;
    bool has_inner_loop = false;
  };
  std::vector<Frame> loops;
  bool found = false;
  InnerLoopWork best;
  for (size_t i = 0; i < code->size(); ++i) {
    const Opcode op = OpOf((*code)[i]);
    if (op == Opcode::kLoop) loops.push_back({i});
    if (op != Opcode::kEndloop || loops.empty()) continue;
    const Frame frame = loops.back();
    loops.pop_back();
    if (!loops.empty()) loops.back().has_inner_loop = true;
    if (frame.has_inner_loop) continue;
    InnerLoopWork work;
    for (size_t j = frame.start + 1; j < i; ++j) {
      const DisassembledInstruction& in = (*code)[j];
      const Opcode body_op = OpOf(in);
      if (body_op == Opcode::kLdRaw && !absl::StartsWith(RegisterOf(in.operands.back()), "g")) {
        work.global_load_bytes += 4 * in.components_written;
      }
      if (IsMemoryAccess(body_op)) continue;
      work.alu_components += in.components_written;
      if (body_op == Opcode::kImad || body_op == Opcode::kUmad || body_op == Opcode::kMad) {
        work.mad_components += in.components_written;
      }
      if (body_op == Opcode::kMad) work.float_mad_components += in.components_written;
    }
    if (work.mad_components > best.mad_components) {
      best = work;
      found = true;
    }
  }
  if (!found) return absl::NotFoundError("no loop with multiply-adds");
  return best;
}

absl::StatusOr<std::vector<LaneLoad>> SimulateFirstLoads(
    const std::vector<uint8_t>& dxbc,
    const std::array<uint32_t, d3d12::kRootConstantCount>& constants, uint32_t lanes,
    absl::string_view resource) {
  absl::StatusOr<std::vector<DisassembledInstruction>> code = Decode(dxbc);
  if (!code.ok()) return code.status();
  absl::StatusOr<Structure> blocks = MatchBlocks(*code);
  if (!blocks.ok()) return blocks.status();
  uint32_t group_x = 1, group_y = 1;
  for (const DisassembledInstruction& in : *code) {
    if (OpOf(in) == Opcode::kDclThreadGroup && in.operands.size() == 3 &&
        (!absl::SimpleAtoi(in.operands[0], &group_x) ||
         !absl::SimpleAtoi(in.operands[1], &group_y))) {
      return absl::InvalidArgumentError("bad dcl_thread_group");
    }
  }
  std::vector<LaneLoad> loads;
  for (uint32_t t = 0; t < lanes; ++t) {
    const Vec4 in_group = {t % group_x, t / group_x % group_y, t / (group_x * group_y), 0};
    Lane lane(constants, in_group, t);
    absl::StatusOr<LaneLoad> load = RunLane(*code, *blocks, lane, resource);
    if (!load.ok()) return load.status();
    loads.push_back(*load);
  }
  return loads;
}

int DistinctSectors(const std::vector<LaneLoad>& loads, uint32_t sector_bytes) {
  std::set<uint64_t> sectors;
  for (const LaneLoad& load : loads) {
    if (!load.loaded || load.bytes == 0) continue;
    const uint64_t first = load.address / sector_bytes;
    const uint64_t last = (uint64_t{load.address} + load.bytes - 1) / sector_bytes;
    for (uint64_t s = first; s <= last; ++s) sectors.insert(s);
  }
  return static_cast<int>(sectors.size());
}

}  // namespace dmlserve::bench
