#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_SCAN_KERNELS_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_SCAN_KERNELS_H_

// Cumulative summation / product kernels (see docs/kernels.md, "Scans", and
// hlsl/scan.hlsl for the HLSL they are equivalent to).
//
// A tensor is scanned as `lines` = outer * inner independent lines of
// `axis` elements with stride `inner`: element i of line L = (o, n) is at
// (o * axis + i) * inner + n. Passes:
//   serial  one thread per line, sequential (short axes)
//   line      one group per line: tiles of threads*per_thread elements, each
//             a per-thread serial scan plus a groupshared Hillis-Steele scan
//             of the thread totals, the carry passed from tile to tile
//   lookback  one group per (line, tile), single pass (decoupled look-back):
//             each group publishes its tile's total in a state buffer (u1),
//             finds its carry-in from its predecessors' published totals or
//             inclusive prefixes, publishes its own inclusive prefix and
//             scans its tile. Each element is read once and written once.
//   clear     zeroes 16-byte slots, one per thread (the look-back state)
//   pack16    32-bit scratch -> 16-bit output, one thread per output dword
//
// Look-back state (u1), one slot of 4 values per tile: [flag, aggregate,
// inclusive, unused], each the width of a compute value (4 or 8 bytes); flag
// 0 (nothing yet), 1 (aggregate written) or 2 (inclusive written). `clear`
// zeroes the state in the stage before: scratch comes from a pool and may
// hold anything, flag-like words of earlier data included.
// Every access is an atomic (performed at device scope: never a stale cached
// line): a writer stores the field, fences device-wide, then stores the
// flag; a reader reads the flag, fences, then the field. The fences are
// group barriers with device-wide memory scope (sync_uglobal_g_t), reached
// by the whole group: vkd3d 1.2 turns any device-wide fence into a group
// control barrier, which thread 0 alone must not reach.
// The look-back reads a window of `threads` predecessors' flags at once (one
// per thread) and folds their aggregates up to the nearest inclusive prefix,
// so a group behind many running ones walks back `threads` tiles per step. A
// predecessor that has published nothing is polled `polls` times; if it
// stays silent the group reduces that tile from the input itself and goes
// on: the kernel makes progress whatever order the device runs groups in (no
// group ever waits for one that may not have started).
//
// 16-bit types are scanned into a 32-bit-per-element scratch buffer (FLOAT16
// accumulates in float32, UINT16 products in uint32) and packed by pack16, so
// no two threads ever write halves of one dword. 64-bit integers are (lo, hi)
// dword pairs added with an explicit carry (vkd3d 1.2 lacks uaddc).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/d3d12/shaders/kernel_abi.h"

namespace dmlserve::d3d12 {

enum class ScanPass : uint8_t { kSerial, kLine, kLookback, kPack16, kClear };
enum class ScanOp : uint8_t { kSum, kProduct };
// Element formats as stored. Signedness does not matter to wrapping sums and
// products, so INT32/UINT32 share i32 and INT64/UINT64 share i64.
enum class ScanFormat : uint8_t { kF32, kF16, kI32, kU16, kI64 };

// The format a pass writes: 16-bit formats widen to 32 bits.
ScanFormat WideFormat(ScanFormat format);
uint32_t FormatBytes(ScanFormat format);

// Root constants of the scan passes (plus kConstGroupsX/kConstGroupCount).
inline constexpr int kScanConstAxis = 0;    // elements per line
inline constexpr int kScanConstInner = 1;   // stride between a line's elements
inline constexpr int kScanConstLines = 2;   // outer * inner
inline constexpr int kScanConstTiles = 3;   // tiles per line (lookback)
inline constexpr int kPackConstCount = 0;   // pack16: elements
inline constexpr int kClearConstSlots = 0;  // clear: 16-byte slots
static_assert(IsKernelConstant(kScanConstAxis));
static_assert(IsKernelConstant(kScanConstInner));
static_assert(IsKernelConstant(kScanConstLines));
static_assert(IsKernelConstant(kScanConstTiles));
static_assert(IsKernelConstant(kPackConstCount));
static_assert(IsKernelConstant(kClearConstSlots));

struct ScanKernelSpec {
  ScanPass pass = ScanPass::kSerial;
  ScanOp op = ScanOp::kSum;
  ScanFormat format = ScanFormat::kF32;  // input format
  bool reverse = false;                  // AxisDirection::kDecreasing
  bool exclusive = false;
  uint32_t threads = 64;    // per group
  uint32_t per_thread = 1;  // elements per thread per tile (line, lookback)
  // lookback: polls of a predecessor's flag before reducing its tile itself
  // (0: always reduce, which tests use to force that path).
  uint32_t polls = kDefaultLookbackPolls;
  static constexpr uint32_t kDefaultLookbackPolls = 128;

  uint32_t tile() const { return threads * per_thread; }
  // "scan.line/sum/f16/dec/excl/t256p4" etc.; lookback adds the polls
  // ("scan.lookback/sum/f32/inc/incl/t64p64/w128"); "scan.pack16/f16";
  // "scan.clear".
  std::string Key() const;
  static absl::StatusOr<ScanKernelSpec> Parse(absl::string_view key);
  bool operator==(const ScanKernelSpec& o) const { return Key() == o.Key(); }
};

absl::StatusOr<std::vector<uint8_t>> BuildScanKernel(const ScanKernelSpec& spec);

// Bytes of look-back state per tile (see above).
uint32_t LookbackStateBytes(ScanFormat format);

// The tile shapes the planner chooses from.
struct ScanTileShape {
  uint32_t threads;
  uint32_t per_thread;
};
inline constexpr uint32_t kSerialThreads = 64;
inline constexpr uint32_t kPackThreads = 64;
inline constexpr uint32_t kClearThreads = 64;
const std::vector<ScanTileShape>& ScanTileShapes();
// Indices into ScanTileShapes(): the line pass takes the short shape for
// lines of at most one short tile, else the long one; lookback its own.
inline constexpr size_t kLineShortTileShape = 0;
inline constexpr size_t kLineLongTileShape = 1;
size_t LookbackTileShape(ScanFormat format);

// Every variant the planner can produce.
std::vector<ScanKernelSpec> AllScanKernelSpecs();

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_SCAN_KERNELS_H_
