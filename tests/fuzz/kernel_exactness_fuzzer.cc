// libFuzzer target: one CPU kernel operation per input, read from it and
// checked against the float64 reference (tests/kernels/kernel_case.h says
// which operations, on which kernel paths, to what rule). A wrong answer is
// a crash, like a sanitizer report. dmlserve_kernels_test runs fixed cases
// of the same kind (KernelCaseTest); here libFuzzer chooses the bytes,
// guided by the coverage of the kernels' edge and blocking branches.
//
//   scripts/fuzz.sh SECONDS    (builds and runs every fuzz target)

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "tests/kernels/kernel_case.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::Status status = dmlserve::testing::CheckKernelCase(absl::MakeConstSpan(data, size));
  if (!status.ok()) {
    std::fprintf(stderr, "kernel_exactness_fuzzer: %s\n", std::string(status.message()).c_str());
    std::abort();
  }
  return 0;
}
