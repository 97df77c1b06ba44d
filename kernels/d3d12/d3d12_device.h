#ifndef DMLSERVE_KERNELS_D3D12_D3D12_DEVICE_H_
#define DMLSERVE_KERNELS_D3D12_D3D12_DEVICE_H_

// dmlserve::Device on a D3D12 logical device: a batch is planned into one
// DispatchPlan (by the kernels' planner), run by the device's runtime, and
// finished into the items' outputs.
//
// Failure routing (kernels/backend/device.h): a lost device (removed, hung,
// failed submission, fault injection) makes Execute return non-OK, now and
// for every later batch, so the scheduler re-queues the jobs elsewhere and
// retires the device. Anything else (a batch the planner cannot plan, a
// kernel that does not build) fails the batch's items and returns OK.
// Recover() replaces the lost runtime with a new one (a new D3D12 device on
// the same adapter) that must compute a known answer before it serves.

#include <functional>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/backend/device.h"
#include "kernels/d3d12/shaders/dispatch_plan.h"

namespace dmlserve::d3d12 {

class DeviceRuntime;

// Turns a batch of compatible operations into one plan whose finish fills
// the items' outputs (and may set per-item statuses). Thread-safe.
using BatchPlanner = std::function<absl::StatusOr<DispatchPlan>(absl::Span<WorkItem> items)>;

// Makes a new runtime for the device (Recover), or fails.
using RuntimeFactory = std::function<absl::StatusOr<std::unique_ptr<DeviceRuntime>>()>;

class D3D12Device : public Device {
 public:
  // Without `recreate` the device cannot recover.
  D3D12Device(DeviceDescription description, std::unique_ptr<DeviceRuntime> runtime,
              BatchPlanner planner, RuntimeFactory recreate = nullptr);
  ~D3D12Device() override;

  const DeviceDescription& description() const override { return description_; }
  absl::Status Execute(absl::Span<WorkItem> items) override;
  absl::Status Recover() override;
  uint64_t WorkingBytes(const Operation& operation) const override;
  int max_inflight_batches() const override;
  bool IsResident(absl::string_view registered_id) const override;
  void Evict(absl::string_view registered_id) override;
  uint64_t memory_bytes() const override;
  uint64_t resident_bytes() const override;

  // The runtime underneath, the current one (tests read its counters).
  DeviceRuntime& runtime() const { return *Current(); }

 private:
  std::shared_ptr<DeviceRuntime> Current() const;
  // Runs `items` on `runtime` (see Execute).
  absl::Status ExecuteOn(DeviceRuntime& runtime, absl::Span<WorkItem> items);

  const DeviceDescription description_;
  const BatchPlanner planner_;
  const RuntimeFactory recreate_;
  // Replaced by Recover; every call works on a snapshot, which keeps the
  // runtime it started on alive until it returns. (std::mutex: this device
  // is also built for Windows against a small Abseil subset, tests/windows.)
  mutable std::mutex runtime_mutex_;
  std::shared_ptr<DeviceRuntime> runtime_;  // guarded by runtime_mutex_
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_D3D12_DEVICE_H_
