#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_KERNEL_ABI_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_KERNEL_ABI_H_

// The binding model every dmlserve compute kernel shares, and kernel identity.
//
// Root signature (one for all kernels, parameter order fixed):
//   0: kRootConstantCount 32-bit root constants, register b0 (cb0[0..4])
//   1..kSrvCount:       root SRV, raw buffer, t0..t3
//   1+kSrvCount..:      root UAV, raw buffer, u0..u1

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dmlserve::d3d12 {

inline constexpr int kRootConstantCount = 20;
// Root constants every kernel reads at fixed slots: a dispatch's groups are
// numbered linearly as gid.y * groups_x + gid.x, and groups at or past
// group_count exit (the grid is rounded up to a rectangle; SetGroupCount
// writes both, KernelAssembler::LinearGroupIndex reads them).
inline constexpr int kConstGroupsX = 14;
inline constexpr int kConstGroupCount = 15;
// Whether root constant `i` is free for a kernel's own use (0..13, 16..19);
// each kernel header static_asserts its constants with it.
constexpr bool IsKernelConstant(int i) {
  return i >= 0 && i < kRootConstantCount && i != kConstGroupsX && i != kConstGroupCount;
}
inline constexpr int kSrvCount = 4;
inline constexpr int kUavCount = 2;

// Identifies one specialised kernel (operator pass, data type, direction,
// tile sizes ...): an opaque, stable string such as
// "scan.local/sum/FLOAT32/dec/excl/t256" chosen by the kernel builders. The
// runtime caches pipeline states by it.
using KernelKey = std::string;

// Builds the DXBC container (with checksum) for a kernel key produced by a
// planner. Deterministic; the runtime caches the result.
absl::StatusOr<std::vector<uint8_t>> BuildKernel(const KernelKey& key);

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_KERNEL_ABI_H_
