#include "kernels/d3d12/shaders/batch_planner.h"

#include <utility>
#include <vector>

#include "kernels/core/overloaded.h"
#include "kernels/d3d12/shaders/plan_builder.h"
#include "kernels/d3d12/shaders/quantized_matmul_planner.h"

namespace dmlserve::d3d12 {

absl::StatusOr<DispatchPlan> PlanBatch(absl::Span<WorkItem> items, const PlannerOptions& options) {
  if (items.empty()) return absl::InvalidArgumentError("empty batch");
  for (const WorkItem& item : items) {
    if (item.operation == nullptr) return absl::InvalidArgumentError("work item without operation");
  }
  PlanBuilder builder;
  std::vector<WorkItem*> matmuls;
  for (WorkItem& item : items) {
    std::visit(Overloaded{
                   [&](const ScanOperation&) {
                     absl::Status status = PlanScan(&item, options.scan, builder);
                     if (!status.ok()) item.status = status;
                   },
                   [&](const QuantizedMatMulOperation&) { matmuls.push_back(&item); },
               },
               *item.operation);
  }
  if (!matmuls.empty()) PlanQuantizedMatMuls(matmuls, options.quantized_matmul, builder);
  return std::move(builder).Build();
}

uint64_t PlanWorkingBytes(const Operation& operation) {
  return std::visit(Overloaded{
                        [](const ScanOperation& scan) {
                          // Upload staging, device input and output, read-back staging and copy.
                          return 4 * static_cast<uint64_t>(scan.input.byte_size());
                        },
                        [](const QuantizedMatMulOperation& matmul) {
                          return QuantizedMatMulWorkingBytes(matmul);
                        },
                    },
                    operation);
}

}  // namespace dmlserve::d3d12
