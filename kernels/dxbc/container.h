#ifndef DMLSERVE_KERNELS_DXBC_CONTAINER_H_
#define DMLSERVE_KERNELS_DXBC_CONTAINER_H_

// The DXBC container around a shader program, and its checksum.
//
// Layout: "DXBC", a 16-byte checksum, version 1, total size, chunk count,
// chunk offsets, then chunks (fourcc, size, data). A compute shader needs only
// empty input/output signatures (ISGN, OSGN) and the program (SHEX); vkd3d
// 1.2 and the D3D12 runtime need no RDEF. The checksum is MD5 with
// DXBC-specific padding over everything after the checksum field; vkd3d and
// the D3D runtime reject blobs whose checksum does not match.

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace dmlserve::dxbc {

using DxbcChecksum = std::array<uint8_t, 16>;

// The checksum of a container (bytes from offset 20 on); `blob` must be at
// least 20 bytes long.
DxbcChecksum ComputeDxbcChecksum(absl::Span<const uint8_t> blob);

// Wraps SHEX program tokens (version token first) in a container with a
// valid checksum.
std::vector<uint8_t> BuildDxbcContainer(absl::Span<const uint32_t> program);

// Checks the magic, sizes and checksum of a container and returns its SHEX
// (or SHDR) program tokens.
absl::StatusOr<std::vector<uint32_t>> ExtractProgram(absl::Span<const uint8_t> blob);

}  // namespace dmlserve::dxbc

#endif  // DMLSERVE_KERNELS_DXBC_CONTAINER_H_
