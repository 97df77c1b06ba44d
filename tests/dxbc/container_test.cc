// The DXBC container and its checksum, verified against vkd3d 1.2, which
// recomputes the checksum and rejects a mismatch ("Invalid DXBC checksum").

#include "kernels/dxbc/container.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/dxbc/assembler.h"
#include "kernels/dxbc/disassembler.h"
#include "tests/dxbc/vkd3d_compiler.h"

namespace dmlserve::dxbc {
namespace {

using ::dmlserve::dxbc::testing::RunVkd3dCompiler;
using ::testing::HasSubstr;

// out[i] = in[i] + 1 over raw buffers, padded with `extra_movs` no-op moves
// so that blob sizes cover every residue modulo the 64-byte MD5 block.
std::vector<uint8_t> AddOneKernel(int extra_movs) {
  struct AddOne : Assembler {
    explicit AddOne(int extra) {
      dcl_globalFlags(kGlobalFlagRefactoringAllowed);
      dcl_resource_raw(0);
      dcl_uav_raw(0);
      dcl_input(vThreadID().x());
      dcl_thread_group(64, 1, 1);
      ishl(r(0).x(), vThreadID().x(), l(2));
      ld_raw(r(0).y(), r(0).x(), t(0));
      iadd(r(0).y(), r(0).y(), l(1));
      for (int i = 0; i < extra; ++i) mov(r(1).x(), l(i));
      store_raw(u(0).x(), r(0).x(), r(0).y());
      ret();
    }
  };
  AddOne kernel(extra_movs);
  absl::StatusOr<std::vector<uint8_t>> blob = kernel.Finish();
  EXPECT_TRUE(blob.ok()) << blob.status();
  return blob.ok() ? *blob : std::vector<uint8_t>();
}

TEST(DxbcContainerTest, Vkd3dAcceptsEveryPaddingCase) {
  // Sizes grow by 20 bytes per move: 16 kernels hit every residue mod 64,
  // both padding branches of the checksum included.
  std::set<size_t> residues;
  for (int extra = 0; extra < 16; ++extra) {
    const std::vector<uint8_t> blob = AddOneKernel(extra);
    ASSERT_FALSE(blob.empty());
    residues.insert((blob.size() - 20) % 64);
    const auto result = RunVkd3dCompiler(blob, "add_one_" + std::to_string(extra));
    EXPECT_EQ(result.exit_code, 0) << "extra=" << extra << ": " << result.output;
  }
  EXPECT_EQ(residues.size(), 16u);
}

TEST(DxbcContainerTest, Vkd3dRejectsAFlippedByte) {
  const std::vector<uint8_t> blob = AddOneKernel(3);
  ASSERT_EQ(RunVkd3dCompiler(blob, "flip_ok").exit_code, 0);

  std::vector<uint8_t> program_flipped = blob;
  program_flipped[program_flipped.size() - 8] ^= 0x01;  // inside SHEX
  const auto bad_program = RunVkd3dCompiler(program_flipped, "flip_program");
  EXPECT_NE(bad_program.exit_code, 0);
  EXPECT_THAT(bad_program.output, HasSubstr("checksum"));

  std::vector<uint8_t> checksum_flipped = blob;
  checksum_flipped[7] ^= 0x80;  // inside the stored checksum
  const auto bad_checksum = RunVkd3dCompiler(checksum_flipped, "flip_checksum");
  EXPECT_NE(bad_checksum.exit_code, 0);
  EXPECT_THAT(bad_checksum.output, HasSubstr("checksum"));
}

TEST(DxbcContainerTest, ChecksumIsStoredAfterTheMagic) {
  const std::vector<uint8_t> blob = AddOneKernel(0);
  ASSERT_GE(blob.size(), 32u);
  EXPECT_EQ(std::string(blob.begin(), blob.begin() + 4), "DXBC");
  const DxbcChecksum checksum = ComputeDxbcChecksum(blob);
  EXPECT_TRUE(std::equal(checksum.begin(), checksum.end(), blob.begin() + 4));
  // The checksum covers everything after itself.
  std::vector<uint8_t> changed = blob;
  changed.back() ^= 1;
  EXPECT_NE(ComputeDxbcChecksum(changed), checksum);
  changed = blob;
  changed[3] ^= 1;  // the magic is not hashed
  EXPECT_EQ(ComputeDxbcChecksum(changed), checksum);
}

TEST(DxbcContainerTest, ExtractProgramRoundTripsAndChecks) {
  struct Tiny : Assembler {
    Tiny() {
      dcl_thread_group(1, 1, 1);
      ret();
    }
  };
  Tiny tiny;
  absl::StatusOr<std::vector<uint32_t>> program = tiny.Program();
  ASSERT_TRUE(program.ok());
  const std::vector<uint8_t> blob = BuildDxbcContainer(*program);
  absl::StatusOr<std::vector<uint32_t>> extracted = ExtractProgram(blob);
  ASSERT_TRUE(extracted.ok()) << extracted.status();
  EXPECT_EQ(*extracted, *program);
  std::vector<uint8_t> bad = blob;
  bad[bad.size() - 1] ^= 0x10;
  EXPECT_FALSE(ExtractProgram(bad).ok());
  absl::StatusOr<std::string> text = DisassembleContainer(blob);
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, HasSubstr("dcl_thread_group 1, 1, 1"));
}

}  // namespace
}  // namespace dmlserve::dxbc
