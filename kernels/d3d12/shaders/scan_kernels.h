#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_SCAN_KERNELS_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_SCAN_KERNELS_H_

// Cumulative summation / product kernels (see docs/kernels.md, "Scans", and
// hlsl/scan.hlsl for the HLSL they are equivalent to).
//
// A tensor is scanned as `lines` = outer * inner independent lines of
// `axis` elements with stride `inner`: element i of line L = (o, n) is at
// (o * axis + i) * inner + n. Passes:
//   serial  one thread per line, sequential (short axes)
//   line    one group per line: tiles of threads*per_thread elements, each a
//           per-thread serial scan plus a groupshared Hillis-Steele scan of
//           the thread totals, the carry passed from tile to tile
//   reduce  one group per (line, tile): the tile's total -> partials
//   tile    one group per (line, tile): as `line` for one tile, with the
//           carry-in read from t1 (the exclusive scan of the partials)
//   pack16  32-bit scratch -> 16-bit output, one thread per output dword
// Long lines run reduce -> line (exclusive, over the partials) -> tile.
//
// 16-bit types are scanned into a 32-bit-per-element scratch buffer (FLOAT16
// accumulates in float32, UINT16 products in uint32) and packed by pack16, so
// no two threads ever write halves of one dword. 64-bit integers are (lo, hi)
// dword pairs added with an explicit carry (vkd3d 1.2 lacks uaddc).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dmlserve::d3d12 {

enum class ScanPass : uint8_t { kSerial, kLine, kReduce, kTile, kPack16 };
enum class ScanOp : uint8_t { kSum, kProduct };
// Element formats as stored. Signedness does not matter to wrapping sums and
// products, so INT32/UINT32 share i32 and INT64/UINT64 share i64.
enum class ScanFormat : uint8_t { kF32, kF16, kI32, kU16, kI64 };

// The format a pass writes: 16-bit formats widen to 32 bits.
ScanFormat WideFormat(ScanFormat format);
uint32_t FormatBytes(ScanFormat format);

// Root constants of the scan passes (plus kConstGroupsX/kConstGroupCount).
inline constexpr int kScanConstAxis = 0;   // elements per line
inline constexpr int kScanConstInner = 1;  // stride between a line's elements
inline constexpr int kScanConstLines = 2;  // outer * inner
inline constexpr int kScanConstTiles = 3;  // tiles per line (reduce, tile)
inline constexpr int kPackConstCount = 0;  // pack16: elements

struct ScanKernelSpec {
  ScanPass pass = ScanPass::kSerial;
  ScanOp op = ScanOp::kSum;
  ScanFormat format = ScanFormat::kF32;  // input format
  bool reverse = false;                  // AxisDirection::kDecreasing
  bool exclusive = false;
  uint32_t threads = 64;    // per group
  uint32_t per_thread = 1;  // elements per thread per tile (line/reduce/tile)

  uint32_t tile() const { return threads * per_thread; }
  // "scan.line/sum/f16/dec/excl/t256p4" etc.; pack16: "scan.pack16/f16".
  std::string Key() const;
  static absl::StatusOr<ScanKernelSpec> Parse(absl::string_view key);
  bool operator==(const ScanKernelSpec& o) const { return Key() == o.Key(); }
};

absl::StatusOr<std::vector<uint8_t>> BuildScanKernel(const ScanKernelSpec& spec);

// The tile shapes the planner chooses from.
struct ScanTileShape {
  uint32_t threads;
  uint32_t per_thread;
};
inline constexpr uint32_t kSerialThreads = 64;
inline constexpr uint32_t kPackThreads = 64;
const std::vector<ScanTileShape>& ScanTileShapes();

// Every variant the planner can produce.
std::vector<ScanKernelSpec> AllScanKernelSpecs();

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_SCAN_KERNELS_H_
