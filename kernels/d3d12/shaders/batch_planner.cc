#include "kernels/d3d12/shaders/batch_planner.h"

#include <utility>
#include <vector>

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
    if (std::holds_alternative<ScanOperation>(*item.operation)) {
      absl::Status status = PlanScan(&item, options.scan, builder);
      if (!status.ok()) item.status = status;
    } else {
      matmuls.push_back(&item);
    }
  }
  if (!matmuls.empty()) PlanQuantizedMatMuls(matmuls, options.quantized_matmul, builder);
  return std::move(builder).Build();
}

uint64_t PlanWorkingBytes(const Operation& operation) {
  if (const auto* scan = std::get_if<ScanOperation>(&operation)) {
    // Upload staging, device input and output, read-back staging and copy.
    return 4 * scan->input.byte_size();
  }
  return QuantizedMatMulWorkingBytes(std::get<QuantizedMatMulOperation>(operation));
}

}  // namespace dmlserve::d3d12
