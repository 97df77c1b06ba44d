#ifndef DMLSERVE_TESTS_D3D12_TEST_KERNELS_H_
#define DMLSERVE_TESTS_D3D12_TEST_KERNELS_H_

// Two tiny kernels for testing the runtime without the product kernels,
// assembled from testdata/*.asm (see testdata/README.md):
//   "test/add_u32":        u0[i] = t0[i] + t1[i] + c[1]   for i < c[0]
//   "test/accumulate_u32": u0[i] = u0[i] + t0[i]          for i < c[0]
// Both run 64 threads per group.

#include <memory>

#include "kernels/d3d12/kernel_library.h"

namespace dmlserve::d3d12::testing {

inline constexpr char kAddKernel[] = "test/add_u32";
inline constexpr char kAccumulateKernel[] = "test/accumulate_u32";
inline constexpr uint32_t kTestKernelGroupSize = 64;

// Builds the test kernels; any other key is NOT_FOUND.
std::shared_ptr<KernelLibrary> TestKernelLibrary();
KernelBuilder TestKernelBuilder();

}  // namespace dmlserve::d3d12::testing

#endif  // DMLSERVE_TESTS_D3D12_TEST_KERNELS_H_
