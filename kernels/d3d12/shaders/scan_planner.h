#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_SCAN_PLANNER_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_SCAN_PLANNER_H_

// Plans cumulative summations and products onto the scan kernels
// (scan_kernels.h). Per job, by axis length:
//   axis <= serial_max_axis, or a strided     serial: one thread per line
//     axis with many lines
//   tiles <= line_max_tiles or many lines     line: one group per line
//   otherwise                                 clear (the look-back state),
//                                             then lookback: one group per
//                                             tile, single pass
// followed, for FLOAT16 and UINT16, by pack16 from the 32-bit scratch.

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/backend/device.h"
#include "kernels/d3d12/shaders/plan_builder.h"
#include "kernels/d3d12/shaders/scan_kernels.h"

namespace dmlserve::d3d12 {

struct ScanPlannerOptions {
  // Axes up to this length run one thread per line.
  uint32_t serial_max_axis = 32;
  // A line of at most this many tiles is scanned by one group in one pass...
  uint32_t line_max_tiles = 4;
  // ...and so is every line when there are at least this many (enough groups
  // to fill the device without splitting lines).
  uint64_t line_min_lines = 1024;
  // A strided axis (inner >= strided_min_inner, so a warp's 32 threads read
  // 32 adjacent lines' elements: 4 sectors a load, each element read and
  // written once) with at least line_min_lines lines runs one thread per
  // line whatever its length. The group-per-line passes would read each
  // element from a sector of its own (32 sectors a load).
  uint32_t strided_min_inner = 32;
  // Tile shape override (index into ScanTileShapes()); -1 picks by axis.
  int tile_shape = -1;
  // Look-back polls before a group reduces a predecessor's tile itself
  // (ScanKernelSpec::polls; 0 forces that path in tests).
  uint32_t lookback_polls = ScanKernelSpec::kDefaultLookbackPolls;
};

// The kernel format and operation for a validated scan.
absl::Status ScanFormatOf(const ScanOperation& op, ScanOp* scan_op, ScanFormat* format);

// Adds `item`'s passes and finisher to `builder`; the finisher writes
// item->output. An error (tensor too large for 32-bit addressing) leaves the
// builder untouched.
absl::Status PlanScan(WorkItem* item, const ScanPlannerOptions& options, PlanBuilder& builder);

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_SCAN_PLANNER_H_
