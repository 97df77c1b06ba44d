#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_BATCH_PLANNER_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_BATCH_PLANNER_H_

// Turns a batch of validated operations into one DispatchPlan (one command
// list): every job gets its own short pass sequence (see scan_planner.h and
// quantized_matmul_planner.h), pass k of all jobs forming stage k with one UAV
// barrier between stages. Matrix multiplies that share B (the scheduler
// guarantees it within a batch) are fused into one product.
//
// A job the kernels cannot run (e.g. a tensor beyond 32-bit addressing) gets
// its WorkItem::status set and is left out of the plan; the others still run.
// `items` must stay alive until plan.finish has run: the finishers write
// items[i].output.

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/backend/device.h"
#include "kernels/d3d12/shaders/dispatch_plan.h"
#include "kernels/d3d12/shaders/quantized_matmul_planner.h"
#include "kernels/d3d12/shaders/scan_planner.h"

namespace dmlserve::d3d12 {

struct PlannerOptions {
  ScanPlannerOptions scan;
  QuantizedMatMulPlannerOptions quantized_matmul;
};

// INVALID_ARGUMENT for an empty batch; per-job failures go to the items. Any
// mix of operations plans correctly (the scheduler sends compatible ones).
absl::StatusOr<DispatchPlan> PlanBatch(absl::Span<WorkItem> items,
                                       const PlannerOptions& options = {});

// An upper bound on the memory running `operation` needs beyond its
// operands and its output: padded and packed copies, upload staging, device
// buffers and read-back (device memory is host memory on lavapipe and WARP,
// so it counts too). A matrix multiply pads K and N to multiples of 4 (B's
// columns to 8 of K): a product with K = N = 1 needs 20 bytes per row with
// per-tensor parameters and 52 with per-row ones (docs/api.md gives the
// formula).
uint64_t PlanWorkingBytes(const Operation& operation);

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_BATCH_PLANNER_H_
