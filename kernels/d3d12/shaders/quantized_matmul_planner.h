#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_PLANNER_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_PLANNER_H_

// Plans quantized matrix multiplies onto the qmm.gemm kernel
// (quantized_matmul_kernels.h).
//
// Jobs that share B (same tensor, b_scale, b_zero_point, and the same A and
// output types) form one group, with B packed into octs once per group: a
// request's own B on the device (qmm.packb), a registered B on the host as a
// kResident buffer, made only when a device must upload it (and cached on
// the host for other devices), so the packed weights stay on the device. When B
// is a single matrix, the group's A rows are stacked into one tall A and run
// as ONE product, with per-row scale/zero-point arrays; a B with batch or
// channel slices runs one dispatch per job, broadcasting by slice strides.
// The buffers are made by quantized_matmul_operands.h, the dispatches by
// quantized_matmul_dispatches.h.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/backend/device.h"
#include "kernels/d3d12/shaders/plan_builder.h"
#include "kernels/d3d12/shaders/quantized_matmul_kernels.h"

namespace dmlserve::d3d12 {

// DMLSERVE_D3D12_QMM_ACCUMULATE=float32 picks the exact float32 FMA kernel
// for qmm.gemm (for comparisons on a GPU); the default is int32 imad.
QmmAccumulate DefaultGemmAccumulate();

struct QuantizedMatMulPlannerOptions {
  // How qmm.gemm multiply-adds (both are exact).
  QmmAccumulate gemm_accumulate = DefaultGemmAccumulate();
  // Host copies of registered tensors' derived forms (packed weights, column
  // parameters) kept for reuse across batches, in bytes (sources included).
  uint64_t packed_weight_cache_bytes = uint64_t{256} << 20;
  // A B that is not registered is packed by qmm.packb on the device; false
  // packs it on the host (as registered ones are), for tests comparing both.
  bool pack_b_on_device = true;
};

// Adds the passes for `items` (all quantized matmuls) to `builder`. Jobs that
// cannot run (K too large for exact 32-bit accumulation, buffers beyond
// 32-bit addressing) get their status set and are left out.
void PlanQuantizedMatMuls(const std::vector<WorkItem*>& items,
                          const QuantizedMatMulPlannerOptions& options, PlanBuilder& builder);

// See PlanWorkingBytes (batch_planner.h).
uint64_t QuantizedMatMulWorkingBytes(const QuantizedMatMulOperation& op);

// The largest |a - a_zero_point| * |b - b_zero_point| * K the kernel's int32
// accumulation handles exactly; beyond it a job fails with OUT_OF_RANGE.
absl::Status CheckAccumulatorRange(const QuantizedMatMulOperation& op);

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_PLANNER_H_
