// Fixed cases of kernel_exactness_fuzzer's kind (kernel_case.h) in every test
// run: random products and scans across the shapes, types, parameters and
// kernel paths it explores, each against the reference.

#include "tests/kernels/kernel_case.h"

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"

namespace dmlserve::testing {
namespace {

absl::Status Check(const std::string& bytes) {
  return CheckKernelCase(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

TEST(KernelCaseTest, SeedsMatchTheReference) {
  // The fuzzer's seed corpus (make_fuzz_seeds writes the same 256).
  constexpr int kSeeds = 256;
  int failures = 0;
  for (int i = 0; i < kSeeds && failures < 5; ++i) {
    const absl::Status status = Check(KernelCaseSeed(i));
    EXPECT_TRUE(status.ok()) << "KernelCaseSeed(" << i << "): " << status;
    failures += status.ok() ? 0 : 1;
  }
}

TEST(KernelCaseTest, AnyBytesAreACase) {
  // Short inputs read as the smallest choices; long ones leave bytes unread.
  for (const std::string& bytes : {std::string(), std::string(1, '\x01'), std::string(1, '\0'),
                                   std::string(200, '\xff'), std::string(200, '\x01')}) {
    EXPECT_TRUE(Check(bytes).ok()) << bytes.size() << " bytes";
  }
}

}  // namespace
}  // namespace dmlserve::testing
