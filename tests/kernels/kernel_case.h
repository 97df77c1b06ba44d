#ifndef DMLSERVE_TESTS_KERNELS_KERNEL_CASE_H_
#define DMLSERVE_TESTS_KERNELS_KERNEL_CASE_H_

// One CPU kernel operation read from bytes, computed on the kernel path the
// bytes choose and checked against the float64 reference (tests/reference):
//  - a quantized matrix multiply, M up to 400, N up to 800 and K up to 2100
//    within 2 Mi multiply-adds (128 Ki on the scalar model of the tiles), a
//    batch and a channel of 1 or 2 in A and in B (a 1 broadcasting), any of
//    the eight type combinations, per-tensor, per-row or per-column
//    parameters, each zero point present or not, random bytes or the ends of
//    each type's range, 7-bit B, scales near typical values or powers of two
//    (whose ties are exact), on one of the GEMM's tables under test
//    (qgemm_tables.h), B sent per request and registered: both bit for bit
//    equal to the reference;
//  - a cumulative sum or product of any type, rank 1 to 4 (up to 64 Ki
//    elements), any axis, direction and exclusivity, in place or not, at one
//    of the ISA levels this CPU runs: within the spec's tolerance
//    (reference::CheckOutput).
// Bytes past the end read as zeros (the smallest choice of each), so any
// bytes are a case. kernel_exactness_fuzzer (tests/fuzz) runs one per input,
// with libFuzzer choosing the bytes; KernelCaseTest runs KernelCaseSeed(0..)
// in every test run.

#include <cstdint>
#include <random>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace dmlserve::testing {

// OK, or which operation on which kernel path differs from the reference,
// and where. Any bytes are valid; not thread-safe (it selects ISA levels
// process-wide for scans).
absl::Status CheckKernelCase(absl::Span<const uint8_t> bytes);

// The bytes of seed `index`: long enough that every choice comes from them,
// random, the same on every machine (the fuzzer's seed corpus and the test's
// cases).
inline std::string KernelCaseSeed(int index) {
  std::mt19937_64 rng(20261129 + static_cast<uint64_t>(index));
  std::string bytes(64, '\0');
  for (char& byte : bytes) byte = static_cast<char>(rng());
  return bytes;
}

}  // namespace dmlserve::testing

#endif  // DMLSERVE_TESTS_KERNELS_KERNEL_CASE_H_
