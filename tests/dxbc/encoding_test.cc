// Instruction encodings of the SM5 assembler, checked word by word.
//
// Expected words are derived from the D3D10/11 tokenized program format
// (opcode in [10:0], controls in [23:11], length in [30:24]; operand: number
// of components [1:0], selection mode [3:2], mask/swizzle/select [11:4], type
// [19:12], index dimension [21:20], index representation [24:22]...). The
// ones marked "fxc" are words that also appear in fxc-compiled blobs (wine's
// and vkd3d's test shaders, the spike's comparison).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/dxbc/assembler.h"
#include "kernels/dxbc/disassembler.h"

namespace dmlserve::dxbc {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// An assembler with the registers the tests use declared.
class TestAssembler : public Assembler {
 public:
  TestAssembler() {
    dcl_constantbuffer(0, 4);
    dcl_resource_raw(0);
    dcl_uav_raw(0);
    dcl_uav_raw(1);
    dcl_tgsm_raw(0, 256);
    dcl_indexable_temp(0, 8, 4);
    dcl_input(vThreadID().xy());
    dcl_input(vThreadGroupID().x());
    dcl_input(vThreadIDInGroup().x());
    dcl_input(vThreadIDInGroupFlattened());
    dcl_thread_group(64, 1, 1);
  }
  std::vector<uint32_t> Code() const {
    EXPECT_TRUE(status().ok()) << status();
    return {instruction_tokens().begin(), instruction_tokens().end()};
  }
};

std::vector<uint32_t> DeclarationOf(void (*emit)(Assembler&)) {
  struct Bare : Assembler {};
  Bare a;
  emit(a);
  EXPECT_TRUE(a.status().ok()) << a.status();
  return {a.declaration_tokens().begin(), a.declaration_tokens().end()};
}

TEST(DeclarationEncodingTest, MatchesFxcWords) {
  EXPECT_THAT(DeclarationOf([](Assembler& a) { a.dcl_globalFlags(kGlobalFlagRefactoringAllowed); }),
              ElementsAre(0x0100086au));  // fxc
  EXPECT_THAT(DeclarationOf([](Assembler& a) { a.dcl_constantbuffer(0, 2); }),
              ElementsAre(0x04000059u, 0x00208e46u, 0u, 2u));  // fxc
  EXPECT_THAT(DeclarationOf([](Assembler& a) { a.dcl_constantbuffer(1, 3, true); }),
              ElementsAre(0x04000859u, 0x00208e46u, 1u, 3u));
  EXPECT_THAT(DeclarationOf([](Assembler& a) { a.dcl_resource_raw(1); }),
              ElementsAre(0x030000a1u, 0x00107000u, 1u));  // fxc
  EXPECT_THAT(DeclarationOf([](Assembler& a) { a.dcl_uav_raw(1); }),
              ElementsAre(0x0300009du, 0x0011e000u, 1u));  // fxc
  EXPECT_THAT(DeclarationOf([](Assembler& a) { a.dcl_uav_raw(0, true); }),
              ElementsAre(0x0301009du, 0x0011e000u, 0u));
  EXPECT_THAT(DeclarationOf([](Assembler& a) { a.dcl_tgsm_raw(0, 256); }),
              ElementsAre(0x0400009fu, 0x0011f000u, 0u, 256u));  // fxc
  EXPECT_THAT(DeclarationOf([](Assembler& a) { a.dcl_input(Assembler::vThreadID().xy()); }),
              ElementsAre(0x0200005fu, 0x00020032u));  // fxc
  EXPECT_THAT(DeclarationOf([](Assembler& a) { a.dcl_input(Assembler::vThreadGroupID().x()); }),
              ElementsAre(0x0200005fu, 0x00021012u));  // fxc
  EXPECT_THAT(DeclarationOf([](Assembler& a) { a.dcl_input(Assembler::vThreadIDInGroup().xyz()); }),
              ElementsAre(0x0200005fu, 0x00022072u));
  EXPECT_THAT(
      DeclarationOf([](Assembler& a) { a.dcl_input(Assembler::vThreadIDInGroupFlattened()); }),
      ElementsAre(0x0200005fu, 0x00024000u));  // fxc
  EXPECT_THAT(DeclarationOf([](Assembler& a) { a.dcl_temps(3); }),
              ElementsAre(0x02000068u, 3u));  // fxc
  EXPECT_THAT(DeclarationOf([](Assembler& a) { a.dcl_indexable_temp(0, 8, 4); }),
              ElementsAre(0x04000069u, 0u, 8u, 4u));
  EXPECT_THAT(DeclarationOf([](Assembler& a) { a.dcl_thread_group(64, 1, 1); }),
              ElementsAre(0x0400009bu, 64u, 1u, 1u));  // fxc
}

TEST(InstructionEncodingTest, ArithmeticWithTempsAndImmediates) {
  TestAssembler a;
  using A = Assembler;
  a.iadd(A::r(0).x(), A::r(1).y(), A::l(1));
  EXPECT_THAT(a.Code(), ElementsAre(0x0700001eu, 0x00100012u, 0u, 0x0010001au, 1u, 0x00004001u,
                                    1u));  // fxc
}

TEST(InstructionEncodingTest, VectorImmediateAndSwizzle) {
  TestAssembler a;
  using A = Assembler;
  a.mov(A::r(0).xy(), A::l(0, 0, 0, 0));
  a.imad(A::r(2).xyzw(), A::r(3).sel("xxxx"), A::r(4), A::r(2));
  EXPECT_THAT(
      a.Code(),
      ElementsAre(0x08000036u, 0x00100032u, 0u, 0x00004002u, 0u, 0u, 0u, 0u,  // fxc
                  0x09000023u, 0x001000f2u, 2u, 0x00100006u, 3u, 0x00100e46u, 4u, 0x00100e46u, 2u));
}

TEST(InstructionEncodingTest, ThreadIdSourcesAndConstantBuffer) {
  TestAssembler a;
  using A = Assembler;
  a.ishl(A::r(0).x(), A::vThreadGroupID().x(), A::l(1));
  a.mov(A::r(0).y(), A::vThreadIDInGroupFlattened().x());
  a.imul(A::r(1).x(), A::vThreadID().y(), A::cb(0, 1).z());
  EXPECT_THAT(
      a.Code(),
      ElementsAre(0x06000029u, 0x00100012u, 0u, 0x0002100au, 0x00004001u, 1u,  // fxc
                  0x04000036u, 0x00100022u, 0u, 0x0002400au,                   // fxc
                  0x08000026u, 0x0000d000u, 0x00100012u, 1u, 0x0002001au, 0x0020802au, 0u, 1u));
}

TEST(InstructionEncodingTest, NegateAndAbsModifiers) {
  TestAssembler a;
  using A = Assembler;
  a.add(A::r(0).x(), -A::r(1).x(), A::r(2).x().abs());
  EXPECT_THAT(a.Code(), ElementsAre(0x09000000u, 0x00100012u, 0u, 0x8010000au, 0x41u, 1u,
                                    0x8010000au, 0x81u, 2u));
}

TEST(InstructionEncodingTest, EveryNamedOpcode) {
  // One instruction per method; checks the opcode numbers and operand counts.
  using A = Assembler;
  auto check = [](void (*emit)(TestAssembler&), uint32_t opcode, uint32_t length) {
    TestAssembler t;
    emit(t);
    std::vector<uint32_t> code = t.Code();
    ASSERT_FALSE(code.empty());
    EXPECT_EQ(code[0] & 0x7ffu, opcode);
    EXPECT_EQ(code[0] >> 24, length) << std::hex << opcode;
    EXPECT_EQ(code.size(), length) << std::hex << opcode;
  };
  // dst + 1 src: 1 + 2 + 2 tokens; dst + 2 src: 7; dst + 3 src: 9.
  check([](TestAssembler& t) { t.mov(A::r(0).x(), A::r(1).x()); }, 0x36, 5);
  check([](TestAssembler& t) { t.movc(A::r(0).x(), A::r(1).x(), A::r(2).x(), A::r(3).x()); }, 0x37,
        9);
  check([](TestAssembler& t) { t.ineg(A::r(0).x(), A::r(1).x()); }, 0x28, 5);
  check([](TestAssembler& t) { t.umul(A::r(0).x(), A::r(1).x(), A::r(2).x(), A::r(3).x()); }, 0x51,
        9);
  check([](TestAssembler& t) { t.umad(A::r(0).x(), A::r(1).x(), A::r(2).x(), A::r(3).x()); }, 0x52,
        9);
  check([](TestAssembler& t) { t.udiv(A::r(0).x(), A::r(1).x(), A::r(2).x(), A::r(3).x()); }, 0x4e,
        9);
  check([](TestAssembler& t) { t.uaddc(A::r(0).x(), A::r(1).x(), A::r(2).x(), A::r(3).x()); }, 0x84,
        9);
  check([](TestAssembler& t) { t.usubb(A::r(0).x(), A::r(1).x(), A::r(2).x(), A::r(3).x()); }, 0x85,
        9);
  check([](TestAssembler& t) { t.ishl(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x29, 7);
  check([](TestAssembler& t) { t.ushr(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x55, 7);
  check([](TestAssembler& t) { t.ishr(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x2a, 7);
  check([](TestAssembler& t) { t.and_(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x01, 7);
  check([](TestAssembler& t) { t.or_(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x3c, 7);
  check([](TestAssembler& t) { t.xor_(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x57, 7);
  check([](TestAssembler& t) { t.not_(A::r(0).x(), A::r(1).x()); }, 0x3b, 5);
  check([](TestAssembler& t) { t.ieq(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x20, 7);
  check([](TestAssembler& t) { t.ine(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x27, 7);
  check([](TestAssembler& t) { t.ilt(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x22, 7);
  check([](TestAssembler& t) { t.ige(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x21, 7);
  check([](TestAssembler& t) { t.ult(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x4f, 7);
  check([](TestAssembler& t) { t.uge(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x50, 7);
  check([](TestAssembler& t) { t.umin(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x54, 7);
  check([](TestAssembler& t) { t.umax(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x53, 7);
  check([](TestAssembler& t) { t.imin(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x25, 7);
  check([](TestAssembler& t) { t.imax(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x24, 7);
  check([](TestAssembler& t) { t.add(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x00, 7);
  check([](TestAssembler& t) { t.mul(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x38, 7);
  check([](TestAssembler& t) { t.mad(A::r(0).x(), A::r(1).x(), A::r(2).x(), A::r(3).x()); }, 0x32,
        9);
  check([](TestAssembler& t) { t.div(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x0e, 7);
  check([](TestAssembler& t) { t.min(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x33, 7);
  check([](TestAssembler& t) { t.max(A::r(0).x(), A::r(1).x(), A::r(2).x()); }, 0x34, 7);
  check([](TestAssembler& t) { t.round_ne(A::r(0).x(), A::r(1).x()); }, 0x40, 5);
  check([](TestAssembler& t) { t.ftoi(A::r(0).x(), A::r(1).x()); }, 0x1b, 5);
  check([](TestAssembler& t) { t.ftou(A::r(0).x(), A::r(1).x()); }, 0x1c, 5);
  check([](TestAssembler& t) { t.itof(A::r(0).x(), A::r(1).x()); }, 0x2b, 5);
  check([](TestAssembler& t) { t.utof(A::r(0).x(), A::r(1).x()); }, 0x56, 5);
  check([](TestAssembler& t) { t.f16tof32(A::r(0).x(), A::r(1).x()); }, 0x83, 5);
  check([](TestAssembler& t) { t.f32tof16(A::r(0).x(), A::r(1).x()); }, 0x82, 5);
  check([](TestAssembler& t) { t.ubfe(A::r(0).x(), A::l(8), A::l(16), A::r(1).x()); }, 0x8a, 9);
  check([](TestAssembler& t) { t.ibfe(A::r(0).x(), A::l(8), A::l(16), A::r(1).x()); }, 0x8b, 9);
  check([](TestAssembler& t) { t.bfi(A::r(0).x(), A::l(16), A::l(16), A::r(1).x(), A::r(2).x()); },
        0x8c, 11);
}

TEST(InstructionEncodingTest, RawMemoryAccess) {
  TestAssembler a;
  using A = Assembler;
  a.ld_raw(A::r(0).y(), A::r(0).x(), A::t(0));         // t0.xxxx (derived)
  a.ld_raw(A::r(1).zw(), A::r(0).x(), A::u(0));        // u0.xxxy
  a.store_raw(A::u(1).xyzw(), A::l(16), A::r(0));      // fxc
  a.store_raw(A::g(0).x(), A::r(0).x(), A::r(1).z());  // g0
  a.ld_raw(A::r(2).x(), A::l(252), A::g(0));
  EXPECT_THAT(a.Code(),
              ElementsAreArray({0x070000a5u, 0x00100022u, 0u, 0x0010000au, 0u,   0x00107006u, 0u,
                                0x070000a5u, 0x001000c2u, 1u, 0x0010000au, 0u,   0x0011e406u, 0u,
                                0x070000a6u, 0x0011e0f2u, 1u, 0x00004001u, 16u,  0x00100e46u, 0u,
                                0x070000a6u, 0x0011f012u, 0u, 0x0010000au, 0u,   0x0010002au, 1u,
                                0x070000a5u, 0x00100012u, 2u, 0x00004001u, 252u, 0x0011f006u, 0u}));
}

TEST(InstructionEncodingTest, ControlFlowAndSync) {
  TestAssembler a;
  using A = Assembler;
  a.loop();
  a.breakc_nz(A::r(0).z());
  a.if_z(A::vThreadIDInGroupFlattened().x());
  a.else_();
  a.endif();
  a.endloop();
  a.sync_g_t();
  a.sync_uglobal_g_t();
  a.ret();
  EXPECT_THAT(a.Code(), ElementsAreArray({0x01000030u, 0x03040003u, 0x0010002au, 0u,  // fxc
                                          0x0200001fu, 0x0002400au,                   // fxc
                                          0x01000012u, 0x01000015u, 0x01000016u,      // fxc
                                          0x010018beu,                                // fxc
                                          0x010058beu, 0x0100003eu}));                // fxc
}

TEST(InstructionEncodingTest, IndexableTempWithRelativeIndex) {
  TestAssembler a;
  using A = Assembler;
  a.mov(A::x(0, A::r(1).x(), 2).x(), A::r(0).x());
  a.mov(A::r(0).y(), A::x(0, 5).y());
  EXPECT_THAT(a.Code(),
              ElementsAreArray({0x08000036u, 0x06203012u, 0u, 2u, 0x0010000au, 1u, 0x0010000au, 0u,
                                0x06000036u, 0x00100022u, 0u, 0x0020301au, 0u, 5u}));
}

TEST(AssemblerErrorTest, RejectsMisuse) {
  using A = Assembler;
  {
    TestAssembler a;
    a.endif();
    EXPECT_FALSE(a.Finish().ok());
  }
  {
    TestAssembler a;
    a.loop();
    EXPECT_FALSE(a.Finish().ok()) << "unclosed loop";
  }
  {
    TestAssembler a;
    a.breakc_nz(A::r(0).x());
    EXPECT_FALSE(a.Finish().ok()) << "breakc outside loop";
  }
  {
    TestAssembler a;
    a.ld_raw(A::r(0).x(), A::l(0), A::t(3));
    EXPECT_FALSE(a.Finish().ok()) << "undeclared t3";
  }
  {
    TestAssembler a;
    a.mov(A::r(0).sel("yx"), A::r(1).x());
    EXPECT_FALSE(a.Finish().ok()) << "mask out of order";
  }
  {
    TestAssembler a;
    a.mov(A::cb(0, 0).x(), A::r(1).x());
    EXPECT_FALSE(a.Finish().ok()) << "constant buffer as destination";
  }
  {
    struct NoGroup : Assembler {};
    NoGroup a;
    a.ret();
    EXPECT_FALSE(a.Finish().ok()) << "no dcl_thread_group";
  }
  // Flags past the controls field would overwrite the instruction length
  // and assemble a corrupt program (found by dxbc_fuzzer).
  {
    TestAssembler a;
    a.dcl_globalFlags(0x07001000);
    const absl::Status status = a.Finish().status();
    EXPECT_THAT(status.message(), ::testing::HasSubstr("controls 0x7001000 outside bits 11-23"));
  }
  {
    TestAssembler a;
    a.sync(1u << 24);
    EXPECT_FALSE(a.Finish().ok()) << "sync flags in the length field";
  }
}

TEST(AssemblerTest, DeclaresTempsAndAppendsRet) {
  TestAssembler a;
  using A = Assembler;
  a.mov(A::r(4).x(), A::l(1));
  absl::StatusOr<std::vector<uint32_t>> program = a.Program();
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ((*program)[0], 0x00050050u);  // cs_5_0
  EXPECT_EQ((*program)[1], program->size());
  EXPECT_EQ(program->back(), 0x0100003eu);
  absl::StatusOr<std::string> text = Disassemble(*program);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, ::testing::HasSubstr("dcl_temps 5"));
  EXPECT_THAT(*text, ::testing::HasSubstr("mov r4.x, l(1)"));
}

TEST(DisassemblerTest, InstructionsCountTheComponentsTheyWrite) {
  TestAssembler a;
  using A = Assembler;
  a.imad(A::r(0), A::r(1), A::r(2), A::r(0));                  // 4 components
  a.iadd(A::r(0).xy(), A::r(0).xy(), A::l(1, 1, 1, 1));        // 2
  a.imul(A::null(), A::r(3).x(), A::r(1).x(), A::r(2).x());    // null + 1
  a.udiv(A::r(4).x(), A::r(5).x(), A::r(1).x(), A::r(2).x());  // 1 + 1
  a.loop();
  a.endloop();
  absl::StatusOr<std::vector<uint32_t>> program = a.Program();
  ASSERT_TRUE(program.ok()) << program.status();
  absl::StatusOr<std::vector<DisassembledInstruction>> instructions =
      DisassembleInstructions(*program);
  ASSERT_TRUE(instructions.ok()) << instructions.status();
  std::vector<std::string> names;
  std::vector<int> written;
  for (const DisassembledInstruction& instruction : *instructions) {
    if (instruction.name.rfind("dcl_", 0) == 0) continue;
    names.push_back(instruction.name);
    written.push_back(instruction.components_written);
  }
  EXPECT_THAT(names, ElementsAre("imad", "iadd", "imul", "udiv", "loop", "endloop", "ret"));
  EXPECT_THAT(written, ElementsAre(4, 2, 1, 2, 0, 0, 0));
  EXPECT_EQ((*instructions)[instructions->size() - 5].operands[0], "null");
}

// Structured groupshared memory: the declaration's stride and count, and
// loads and stores whose offset is an immediate (what the matmul kernel's K
// loop relies on to address groupshared memory without instructions).
TEST(InstructionEncodingTest, StructuredGroupsharedAccess) {
  struct Bare : Assembler {};
  Bare a;
  using A = Assembler;
  a.dcl_tgsm_structured(1, 272, 64);
  a.dcl_thread_group(64, 1, 1);
  a.ld_structured(A::r(0), A::r(1).x(), A::l(32), A::g(1));
  a.ld_structured(A::r(2).xy(), A::r(1).x(), A::l(48), A::g(1));
  a.store_structured(A::g(1).xyzw(), A::r(1).x(), A::r(1).y(), A::r(0));
  absl::StatusOr<std::vector<uint32_t>> program = a.Program();
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_THAT(std::vector<uint32_t>(a.declaration_tokens().begin(), a.declaration_tokens().end()),
              ::testing::IsSupersetOf({0x000000a0u | (5u << 24), 1u, 272u, 64u}));
  // ld_structured: length 9 (opcode, dest 2, index 2, offset 2, g1 2).
  EXPECT_EQ(a.instruction_tokens()[0], 0x090000a7u);
  absl::StatusOr<std::vector<DisassembledInstruction>> instructions =
      DisassembleInstructions(*program);
  ASSERT_TRUE(instructions.ok()) << instructions.status();
  std::vector<std::string> text;
  for (const DisassembledInstruction& in : *instructions) {
    text.push_back(absl::StrCat(in.name, " ", absl::StrJoin(in.operands, ", ")));
  }
  EXPECT_THAT(text, ::testing::Contains("dcl_tgsm_structured g1, 272, 64"));
  EXPECT_THAT(text, ::testing::Contains("ld_structured r0.xyzw, r1.x, l(32), g1.xyzw"));
  EXPECT_THAT(text, ::testing::Contains("ld_structured r2.xy, r1.x, l(48), g1.xyyy"));
  EXPECT_THAT(text, ::testing::Contains("store_structured g1.xyzw, r1.x, r1.y, r0.xyzw"));
  Bare bad;
  bad.dcl_tgsm_structured(0, 2050, 4);
  EXPECT_FALSE(bad.status().ok());
}

TEST(AssemblerTest, NewTempSkipsUsedRegisters) {
  TestAssembler a;
  using A = Assembler;
  a.mov(A::r(2).x(), A::l(1));
  const uint32_t t0 = a.NewTemp();
  const uint32_t t1 = a.NewTemp();
  EXPECT_EQ(t0, 3u);
  EXPECT_EQ(t1, 4u);
}

}  // namespace
}  // namespace dmlserve::dxbc
