// libFuzzer target: dmlserve's SM5 toolchain (kernels/dxbc/). The first input
// byte picks what the rest is:
//   0  a program for the assembler: each step calls one public Assembler
//      method with operands (registers, indices, immediates, component
//      selections, modifiers; valid or not) taken from the input. Whatever
//      Finish() accepts must read back: the container's checksum verifies,
//      ExtractProgram returns exactly Program()'s tokens, and the
//      disassembler understands every token.
//   1  a DXBC container: ExtractProgram with the checksum as given and
//      again with it corrected (so mutations reach the chunk parser), then
//      the disassembler on any program found.
//   2  raw program tokens for the disassembler.
// Anything else is a crash only when it crashes or a sanitizer reports: bad
// input must end in an error status.
//
//   scripts/fuzz.sh SECONDS    (builds and runs every fuzz target)

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/dxbc/assembler.h"
#include "kernels/dxbc/container.h"
#include "kernels/dxbc/disassembler.h"

namespace {

using dmlserve::dxbc::Assembler;
using dmlserve::dxbc::Operand;

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

// Builds operands and calls Assembler methods as the input says.
class InputAssembler : public Assembler {
 public:
  explicit InputAssembler(FuzzedDataProvider* input) : in_(*input) {}

  void Run() {
    for (int step = 0; step < 96 && in_.remaining_bytes() > 0; ++step) Step();
  }

 private:
  // Small indices mostly (so declarations and uses meet), any value at times.
  uint32_t Index() {
    return in_.ConsumeBool() ? in_.ConsumeIntegralInRange<uint32_t>(0, 7)
                             : in_.ConsumeIntegral<uint32_t>();
  }

  Operand Select(Operand operand) {
    static constexpr const char* kSelections[] = {"",     "x",  "y",   "z",     "w",
                                                  "xy",   "zw", "xyz", "xyzw",  "xxyy",
                                                  "wzyx", "yx", "q",   "xyzwx", "xx"};
    const char* text = kSelections[in_.ConsumeIntegralInRange<size_t>(
        0, sizeof(kSelections) / sizeof(kSelections[0]) - 1)];
    if (*text != '\0') operand = operand.sel(text);
    switch (in_.ConsumeIntegralInRange(0, 3)) {
      case 1:
        return -operand;
      case 2:
        return operand.abs();
      default:
        return operand;
    }
  }

  Operand Plain(int depth = 0) {
    switch (in_.ConsumeIntegralInRange(0, 15)) {
      case 0:
        return r(Index());
      case 1:
        return x(Index(), Index());
      case 2:
        // Relative addressing nests at most once: deeper adds nothing.
        return depth > 0 ? r(Index()) : x(Index(), Plain(depth + 1), Index());
      case 3:
        return cb(Index(), Index());
      case 4:
        return t(Index());
      case 5:
        return u(Index());
      case 6:
        return g(Index());
      case 7:
        return null();
      case 8:
        return vThreadID();
      case 9:
        return vThreadGroupID();
      case 10:
        return vThreadIDInGroup();
      case 11:
        return vThreadIDInGroupFlattened();
      case 12:
        return l(in_.ConsumeIntegral<int32_t>());
      case 13:
        return l(in_.ConsumeIntegral<int32_t>(), in_.ConsumeIntegral<int32_t>(),
                 in_.ConsumeIntegral<int32_t>(), in_.ConsumeIntegral<int32_t>());
      case 14:
        return lf(in_.ConsumeFloatingPoint<float>());
      default:
        return Operand();  // not a valid operand at all
    }
  }

  Operand Any() { return Select(Plain()); }

  void Step() {
    const Operand a = Any();
    const Operand b = Any();
    const Operand c = Any();
    const Operand d = Any();
    const Operand e = Any();
    switch (in_.ConsumeIntegralInRange(0, 63)) {
      // Declarations.
      case 0:
        dcl_globalFlags(in_.ConsumeIntegral<uint32_t>());
        break;
      case 1:
        dcl_constantbuffer(Index(), Index(), in_.ConsumeBool());
        break;
      case 2:
        dcl_resource_raw(Index());
        break;
      case 3:
        dcl_uav_raw(Index(), in_.ConsumeBool());
        break;
      case 4:
        dcl_tgsm_raw(Index(), in_.ConsumeIntegral<uint32_t>());
        break;
      case 5:
        dcl_input(a);
        break;
      case 6:
        dcl_temps(Index());
        break;
      case 7:
        dcl_indexable_temp(Index(), Index(), Index());
        break;
      case 8:
        dcl_thread_group(Index(), Index(), Index());
        break;
      // Arithmetic.
      case 9:
        mov(a, b);
        break;
      case 10:
        movc(a, b, c, d);
        break;
      case 11:
        iadd(a, b, c);
        break;
      case 12:
        ineg(a, b);
        break;
      case 13:
        imul(a, b, c, d);
        break;
      case 14:
        umul(a, b, c, d);
        break;
      case 15:
        imad(a, b, c, d);
        break;
      case 16:
        umad(a, b, c, d);
        break;
      case 17:
        udiv(a, b, c, d);
        break;
      case 18:
        uaddc(a, b, c, d);
        break;
      case 19:
        usubb(a, b, c, d);
        break;
      case 20:
        ishl(a, b, c);
        break;
      case 21:
        ushr(a, b, c);
        break;
      case 22:
        ishr(a, b, c);
        break;
      case 23:
        and_(a, b, c);
        break;
      case 24:
        or_(a, b, c);
        break;
      case 25:
        xor_(a, b, c);
        break;
      case 26:
        not_(a, b);
        break;
      case 27:
        imin(a, b, c);
        break;
      case 28:
        umax(a, b, c);
        break;
      case 29:
        ubfe(a, b, c, d);
        break;
      case 30:
        ibfe(a, b, c, d);
        break;
      case 31:
        bfi(a, b, c, d, e);
        break;
      case 32:
        ieq(a, b, c);
        break;
      case 33:
        ult(a, b, c);
        break;
      case 34:
        lt(a, b, c);
        break;
      case 35:
        ge(a, b, c);
        break;
      case 36:
        add(a, b, c);
        break;
      case 37:
        mad(a, b, c, d);
        break;
      case 38:
        div(a, b, c);
        break;
      case 39:
        round_ni(a, b);
        break;
      case 40:
        ftoi(a, b);
        break;
      case 41:
        utof(a, b);
        break;
      case 42:
        f16tof32(a, b);
        break;
      case 43:
        f32tof16(a, b);
        break;
      // Memory.
      case 44:
        ld_raw(a, b, c);
        break;
      case 45:
        store_raw(a, b, c);
        break;
      case 46:
        atomic_iadd(a, b, c);
        break;
      case 47:
        imm_atomic_iadd(a, b, c, d);
        break;
      // Control flow.
      case 48:
        if_nz(a);
        break;
      case 49:
        if_z(a);
        break;
      case 50:
        else_();
        break;
      case 51:
        endif();
        break;
      case 52:
        loop();
        break;
      case 53:
        endloop();
        break;
      case 54:
        break_();
        break;
      case 55:
        breakc_nz(a);
        break;
      case 56:
        continue_();
        break;
      case 57:
        continuec_z(a);
        break;
      case 58:
        ret();
        break;
      case 59:
        retc_nz(a);
        break;
      // Barriers and temps.
      case 60:
        sync_g_t();
        break;
      case 61:
        sync(in_.ConsumeIntegral<uint32_t>());
        break;
      case 62:
        ReserveTemps(Index());
        break;
      default:
        mov(r(NewTemp()), a);
        break;
    }
  }

  FuzzedDataProvider& in_;
};

void AssembleAndReadBack(FuzzedDataProvider* input) {
  InputAssembler assembler(input);
  assembler.Run();
  const absl::StatusOr<std::vector<uint32_t>> program = assembler.Program();
  const absl::StatusOr<std::vector<uint8_t>> blob = assembler.Finish();
  Check(program.ok() == blob.ok());
  if (!blob.ok()) return;
  const absl::StatusOr<std::vector<uint32_t>> extracted = dmlserve::dxbc::ExtractProgram(*blob);
  Check(extracted.ok() && *extracted == *program);
  const absl::StatusOr<std::string> text = dmlserve::dxbc::DisassembleContainer(*blob);
  if (!text.ok()) {
    std::fprintf(stderr, "assembled, but the disassembler says: %s\n",
                 std::string(text.status().message()).c_str());
    for (uint32_t token : *program) std::fprintf(stderr, "%08x ", token);
    std::fprintf(stderr, "\n");
    __builtin_trap();
  }
}

void ReadContainer(const uint8_t* data, size_t size) {
  std::vector<uint8_t> blob(data, data + size);
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) {
      if (blob.size() < 20) return;
      const dmlserve::dxbc::DxbcChecksum checksum = dmlserve::dxbc::ComputeDxbcChecksum(blob);
      std::memcpy(blob.data() + 4, checksum.data(), checksum.size());
    }
    const absl::StatusOr<std::vector<uint32_t>> program = dmlserve::dxbc::ExtractProgram(blob);
    if (program.ok()) (void)dmlserve::dxbc::Disassemble(*program);
    (void)dmlserve::dxbc::DisassembleContainer(blob);
  }
}

void Disassemble(const uint8_t* data, size_t size) {
  std::vector<uint32_t> tokens(size / 4);
  if (!tokens.empty()) std::memcpy(tokens.data(), data, tokens.size() * 4);
  (void)dmlserve::dxbc::Disassemble(tokens);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0] % 3;
  if (mode == 0) {
    FuzzedDataProvider input(data + 1, size - 1);
    AssembleAndReadBack(&input);
  } else if (mode == 1) {
    ReadContainer(data + 1, size - 1);
  } else {
    Disassemble(data + 1, size - 1);
  }
  return 0;
}
