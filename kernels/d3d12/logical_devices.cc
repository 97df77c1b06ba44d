#include "kernels/d3d12/logical_devices.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/d3d12/device_runtime.h"
#include "kernels/d3d12/fault_injection.h"

namespace dmlserve::d3d12 {
namespace {

absl::StatusOr<std::vector<AdapterInfo>> SelectAdapters(const D3D12Options& options) {
  absl::StatusOr<std::vector<AdapterInfo>> adapters = EnumerateAdapters();
  if (!adapters.ok()) return adapters.status();
  std::vector<AdapterInfo> selected;
  if (options.adapter_indices.empty()) {
    for (const AdapterInfo& adapter : *adapters) {
      if (!adapter.software || options.allow_software) selected.push_back(adapter);
    }
    if (selected.empty()) {
      return absl::NotFoundError(absl::StrCat(
          "no D3D12 adapter to use: ", adapters->size(), " adapter(s), ",
          adapters->empty() ? "none" : "all software",
          options.allow_software
              ? ""
              : " (software adapters such as lavapipe or WARP only with --backend=d3d12)"));
    }
    return selected;
  }
  for (int index : options.adapter_indices) {
    if (index < 0 || index >= static_cast<int>(adapters->size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("no D3D12 adapter ", index, " (there are ", adapters->size(), ")"));
    }
    const AdapterInfo& adapter = (*adapters)[index];
    if (adapter.software && !options.allow_software) {
      return absl::FailedPreconditionError(
          absl::StrCat("D3D12 adapter ", index, " (", adapter.name,
                       ") is a software adapter; only --backend=d3d12 uses those"));
    }
    for (const AdapterInfo& already : selected) {
      if (already.index == index) {
        return absl::InvalidArgumentError(absl::StrCat("D3D12 adapter ", index,
                                                       " listed twice; use "
                                                       "--d3d12_devices_per_adapter instead"));
      }
    }
    selected.push_back(adapter);
  }
  return selected;
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateLogicalDevices(
    const D3D12Options& options, BatchPlanner planner, std::shared_ptr<KernelLibrary> kernels) {
  if (options.devices_per_adapter < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--d3d12_devices_per_adapter must be at least 1, got ", options.devices_per_adapter));
  }
  if (options.inflight_batches_per_device < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("in-flight batches per device must be at least 1, got ",
                     options.inflight_batches_per_device));
  }
  absl::StatusOr<std::vector<AdapterInfo>> adapters = SelectAdapters(options);
  if (!adapters.ok()) return adapters.status();

  std::vector<std::unique_ptr<Device>> devices;
  for (const AdapterInfo& adapter : *adapters) {
    // One D3D12 device per adapter, shared by its logical devices (D3D12 on
    // Windows returns the same object anyway); each logical device has its
    // own queue, rings, pools and residency.
    absl::StatusOr<ComPtr<ID3D12Device>> device = CreateAdapterDevice(adapter.index);
    if (!device.ok()) return device.status();
    for (int logical = 0; logical < options.devices_per_adapter; ++logical) {
      RuntimeOptions runtime_options;
      runtime_options.name = absl::StrCat("d3d12:", devices.size());
      runtime_options.inflight_batches = options.inflight_batches_per_device;
      runtime_options.fail_after_batches = options.fail_after_batches;
      runtime_options.batch_timeout_ms = options.batch_timeout_ms;
      absl::StatusOr<std::unique_ptr<DeviceRuntime>> runtime =
          DeviceRuntime::Create(*device, kernels, runtime_options);
      if (!runtime.ok()) return runtime.status();
      // After a failure: a device of its own on the same adapter (the shared
      // one is lost with it), without fault injection.
      RuntimeOptions recreated_options = runtime_options;
      recreated_options.fail_after_batches = kFaultInjectionOff;
      RuntimeFactory recreate =
          [index = adapter.index, kernels,
           recreated_options]() -> absl::StatusOr<std::unique_ptr<DeviceRuntime>> {
        absl::StatusOr<ComPtr<ID3D12Device>> fresh = CreateAdapterDevice(index);
        if (!fresh.ok()) return fresh.status();
        return DeviceRuntime::Create(*fresh, kernels, recreated_options);
      };
      DeviceDescription description;
      description.name = runtime_options.name;
      description.backend = "d3d12";
      description.description = adapter.name;
      description.software = adapter.software;
      devices.push_back(std::make_unique<D3D12Device>(std::move(description), std::move(*runtime),
                                                      planner, std::move(recreate)));
    }
  }
  return devices;
}

}  // namespace dmlserve::d3d12
