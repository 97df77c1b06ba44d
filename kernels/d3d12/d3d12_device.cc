#include "kernels/d3d12/d3d12_device.h"

#include <string>
#include <utility>
#include <vector>

#include "kernels/d3d12/device_runtime.h"

namespace dmlserve::d3d12 {
namespace {

void FailItems(absl::Span<WorkItem> items, const absl::Status& status) {
  for (WorkItem& item : items) {
    if (item.status.ok()) item.status = status;
  }
}

}  // namespace

D3D12Device::D3D12Device(DeviceDescription description, std::unique_ptr<DeviceRuntime> runtime,
                         BatchPlanner planner)
    : description_(std::move(description)),
      runtime_(std::move(runtime)),
      planner_(std::move(planner)) {}

D3D12Device::~D3D12Device() = default;

absl::Status D3D12Device::Execute(absl::Span<WorkItem> items) {
  if (absl::Status health = runtime_->health(); !health.ok()) return health;
  absl::StatusOr<DispatchPlan> plan = planner_(items);
  if (!plan.ok()) {
    FailItems(items, plan.status());
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> outputs = runtime_->Run(*plan);
  if (!outputs.ok()) {
    if (absl::Status health = runtime_->health(); !health.ok()) return health;
    FailItems(items, outputs.status());
    return absl::OkStatus();
  }
  if (!plan->finish) {
    FailItems(items, absl::InternalError("the D3D12 plan has no finisher"));
    return absl::OkStatus();
  }
  if (absl::Status finished = plan->finish(*outputs); !finished.ok()) FailItems(items, finished);
  return absl::OkStatus();
}

int D3D12Device::max_inflight_batches() const { return runtime_->max_inflight_batches(); }

bool D3D12Device::IsResident(absl::string_view registered_id) const {
  return runtime_->IsResident(registered_id);
}

void D3D12Device::Evict(absl::string_view registered_id) { runtime_->Evict(registered_id); }

uint64_t D3D12Device::memory_bytes() const { return runtime_->memory_bytes(); }
uint64_t D3D12Device::resident_bytes() const { return runtime_->resident_bytes(); }

}  // namespace dmlserve::d3d12
