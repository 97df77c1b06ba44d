// Kernel keys: every variant the planners can produce has one canonical key
// that parses back to itself and builds a verifiable DXBC container.

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/d3d12/shaders/kernel_abi.h"
#include "kernels/d3d12/shaders/kernel_registry.h"
#include "kernels/d3d12/shaders/scan_kernels.h"
#include "kernels/dxbc/container.h"
#include "kernels/dxbc/disassembler.h"

namespace dmlserve::d3d12 {
namespace {

TEST(KernelKeyTest, EveryKeyIsUniqueAndBuilds) {
  const std::vector<KernelKey> keys = AllKernelKeys();
  ASSERT_FALSE(keys.empty());
  std::set<KernelKey> unique(keys.begin(), keys.end());
  EXPECT_EQ(unique.size(), keys.size());
  for (const KernelKey& key : keys) {
    absl::StatusOr<std::vector<uint8_t>> blob = BuildKernel(key);
    ASSERT_TRUE(blob.ok()) << key << ": " << blob.status();
    EXPECT_TRUE(dxbc::ExtractProgram(*blob).ok()) << key;
    // Deterministic: the runtime may cache by key.
    absl::StatusOr<std::vector<uint8_t>> again = BuildKernel(key);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*blob, *again) << key;
  }
}

TEST(KernelKeyTest, ScanKeysRoundTrip) {
  for (const ScanKernelSpec& spec : AllScanKernelSpecs()) {
    absl::StatusOr<ScanKernelSpec> parsed = ScanKernelSpec::Parse(spec.Key());
    ASSERT_TRUE(parsed.ok()) << spec.Key() << ": " << parsed.status();
    EXPECT_EQ(parsed->Key(), spec.Key());
  }
  ScanKernelSpec spec;
  spec.pass = ScanPass::kLookback;
  spec.op = ScanOp::kProduct;
  spec.format = ScanFormat::kU16;
  spec.reverse = true;
  spec.exclusive = true;
  spec.threads = 256;
  spec.per_thread = 4;
  spec.polls = 0;
  EXPECT_EQ(spec.Key(), "scan.lookback/prod/u16/dec/excl/t256p4/w0");
}

TEST(KernelKeyTest, RejectsMalformedAndUnsupportedKeys) {
  for (const char* key :
       {"", "scan.", "scan.line/sum/f32/inc/incl", "scan.line/sum/f32/up/incl/t64p4",
        "scan.line/sum/u16/inc/incl/t64p4",    // UINT16 is product-only
        "scan.line/prod/i64/inc/incl/t64p4",   // 64-bit is sum-only
        "scan.line/sum/f32/inc/incl/t63p4",    // threads not a power of 2
        "scan.lookback/sum/f32/inc/incl/t64p4",       // lookback names its polls
        "scan.line/sum/f32/inc/incl/t64p4/w128",      // only lookback polls
        "scan.lookback/sum/i64/inc/incl/t64p64/w128",  // tile past 32 KiB groupshared
        "scan.pack16/f32", "nosuch.kernel"}) {
    EXPECT_FALSE(BuildKernel(key).ok()) << key;
  }
}

TEST(KernelKeyTest, LookbackKernelUsesGroupsharedScanAndCoherentState) {
  absl::StatusOr<std::vector<uint8_t>> blob =
      BuildKernel("scan.lookback/sum/i64/dec/excl/t64p4/w128");
  ASSERT_TRUE(blob.ok()) << blob.status();
  absl::StatusOr<std::string> text = dxbc::DisassembleContainer(*blob);
  ASSERT_TRUE(text.ok());
  // 64 thread totals and the staged tile of 256 elements plus 8 padding
  // slots, 8 bytes each, then the mailbox (decision and count words, a
  // value) and the look-back window (64 flags).
  EXPECT_THAT(*text, ::testing::HasSubstr("dcl_tgsm_raw g0, 2896"));
  EXPECT_THAT(*text, ::testing::HasSubstr("dcl_uav_raw_glc u1"));
  EXPECT_THAT(*text, ::testing::HasSubstr("sync_g_t"));
  // Device-wide fences only where the whole group arrives (vkd3d 1.2 makes
  // every device-wide fence a group control barrier).
  EXPECT_THAT(*text, ::testing::HasSubstr("sync_uglobal_g_t"));
  EXPECT_THAT(*text, ::testing::Not(::testing::HasSubstr("sync_uglobal\n")));
  EXPECT_THAT(*text, ::testing::HasSubstr("imm_atomic_iadd"));
  EXPECT_THAT(*text, ::testing::HasSubstr("imm_atomic_exch"));
  EXPECT_THAT(*text, ::testing::HasSubstr("ld_raw r"));
  EXPECT_THAT(*text, ::testing::Not(::testing::HasSubstr("uaddc")));  // vkd3d 1.2 lacks it
}

}  // namespace
}  // namespace dmlserve::d3d12
