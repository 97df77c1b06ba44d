#include "kernels/d3d12/d3d12_device.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/d3d12/device_runtime.h"
#include "kernels/d3d12/shaders/batch_planner.h"

namespace dmlserve::d3d12 {
namespace {

void FailItems(absl::Span<WorkItem> items, const absl::Status& status) {
  for (WorkItem& item : items) {
    if (item.status.ok()) item.status = status;
  }
}

}  // namespace

D3D12Device::D3D12Device(DeviceDescription description, std::unique_ptr<DeviceRuntime> runtime,
                         BatchPlanner planner, RuntimeFactory recreate)
    : description_(std::move(description)),
      planner_(std::move(planner)),
      recreate_(std::move(recreate)),
      runtime_(std::move(runtime)) {}

D3D12Device::~D3D12Device() = default;

std::shared_ptr<DeviceRuntime> D3D12Device::Current() const {
  std::lock_guard<std::mutex> lock(runtime_mutex_);
  return runtime_;
}

absl::Status D3D12Device::Execute(absl::Span<WorkItem> items) {
  return ExecuteOn(*Current(), items);
}

absl::Status D3D12Device::Recover() {
  if (!recreate_) return Device::Recover();
  absl::StatusOr<std::unique_ptr<DeviceRuntime>> fresh = recreate_();
  if (!fresh.ok()) return fresh.status();
  // A known answer before it serves: the cumulative sum of 1, 2, 3, 4.
  Tensor input = Tensor::Allocate(DataType::kFloat32, {1, 1, 1, 4});
  for (int i = 0; i < 4; ++i) input.mutable_data_as<float>()[i] = static_cast<float>(i + 1);
  absl::StatusOr<ScanOperation> scan = MakeScanOperation(
      OperatorKind::kCumulativeSummation, std::move(input), 3, AxisDirection::kIncreasing, false);
  if (!scan.ok()) return scan.status();
  const Operation operation = *std::move(scan);
  WorkItem item;
  item.operation = &operation;
  if (absl::Status ran = ExecuteOn(**fresh, absl::MakeSpan(&item, 1)); !ran.ok()) return ran;
  if (!item.status.ok()) return item.status;
  const float expected[4] = {1, 3, 6, 10};
  if (item.output.byte_size() != sizeof(expected) ||
      std::memcmp(item.output.data(), expected, sizeof(expected)) != 0) {
    return absl::InternalError("the new device computed a wrong known answer");
  }
  std::lock_guard<std::mutex> lock(runtime_mutex_);
  runtime_ = std::move(*fresh);
  return absl::OkStatus();
}

absl::Status D3D12Device::ExecuteOn(DeviceRuntime& runtime, absl::Span<WorkItem> items) {
  if (absl::Status health = runtime.health(); !health.ok()) return health;
  absl::StatusOr<DispatchPlan> plan = planner_(items);
  if (!plan.ok()) {
    FailItems(items, plan.status());
    return absl::OkStatus();
  }
  absl::StatusOr<ReadBackBuffers> outputs = runtime.Run(*plan);
  if (!outputs.ok()) {
    if (absl::Status health = runtime.health(); !health.ok()) return health;
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

uint64_t D3D12Device::WorkingBytes(const Operation& operation) const {
  return PlanWorkingBytes(operation);
}

int D3D12Device::max_inflight_batches() const { return Current()->max_inflight_batches(); }

bool D3D12Device::IsResident(absl::string_view registered_id) const {
  return Current()->IsResident(registered_id);
}

void D3D12Device::Evict(absl::string_view registered_id) { Current()->Evict(registered_id); }

uint64_t D3D12Device::memory_bytes() const { return Current()->memory_bytes(); }
uint64_t D3D12Device::resident_bytes() const { return Current()->resident_bytes(); }

}  // namespace dmlserve::d3d12
