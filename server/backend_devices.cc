#include "server/backend_devices.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_device.h"
#if DMLSERVE_HAVE_D3D12
#include "kernels/d3d12/d3d12_backend.h"
#endif

namespace dmlserve {
namespace {

using DeviceList = std::vector<std::unique_ptr<Device>>;

absl::StatusOr<DeviceList> CreateCpuBackend(const BackendDeviceOptions& options) {
  if (options.cpu_devices < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cpu_devices=", options.cpu_devices, ": at least 1 is needed"));
  }
  DeviceList devices = CreateCpuDevices(options.cpu_devices);
  if (devices.empty()) return absl::InternalError("the CPU backend created no devices");
  return devices;
}

#if DMLSERVE_HAVE_D3D12
std::vector<AdapterReport> FindAdapters() {
  std::vector<AdapterReport> reports;
  absl::StatusOr<std::vector<AdapterInfo>> adapters = EnumerateAdapters();
  if (!adapters.ok()) return reports;
  for (const AdapterInfo& adapter : *adapters) {
    AdapterReport report;
    report.index = adapter.index;
    report.name = adapter.name;
    report.software = adapter.software;
    report.vendor_id = adapter.vendor_id;
    report.device_id = adapter.device_id;
    reports.push_back(std::move(report));
  }
  return reports;
}

absl::Status AddD3D12Devices(const BackendDeviceOptions& options, bool allow_software,
                             DeviceSet& set) {
  D3D12Options d3d12;
  d3d12.adapter_indices = options.adapter_indices;
  d3d12.devices_per_adapter = options.d3d12_devices_per_adapter;
  d3d12.allow_software = allow_software;
  d3d12.inflight_batches_per_device = options.d3d12_inflight_batches;
  d3d12.fail_after_batches = options.d3d12_fail_after_batches;
  absl::StatusOr<DeviceList> devices = CreateD3D12Devices(d3d12);
  if (!devices.ok()) return devices.status();
  set.devices = *std::move(devices);
  // An adapter is used when some device runs on it; devices carry the
  // adapter's name as their description.
  for (AdapterReport& adapter : set.adapters) {
    const bool selected =
        options.adapter_indices.empty()
            ? (allow_software || !adapter.software)
            : std::find(options.adapter_indices.begin(), options.adapter_indices.end(),
                        adapter.index) != options.adapter_indices.end();
    adapter.used = selected;
  }
  if (options.cpu_fallback) {
    absl::StatusOr<DeviceList> cpu = CreateCpuBackend(options);
    if (!cpu.ok()) return cpu.status();
    set.fallback_devices = *std::move(cpu);
  }
  return absl::OkStatus();
}
#endif

}  // namespace

bool HaveD3D12Backend() { return DMLSERVE_HAVE_D3D12 != 0; }

absl::StatusOr<DeviceSet> CreateBackendDevices(absl::string_view backend,
                                               const BackendDeviceOptions& options) {
  DeviceSet set;
  if (backend == "cpu") {
    absl::StatusOr<DeviceList> devices = CreateCpuBackend(options);
    if (!devices.ok()) return devices.status();
    set.devices = *std::move(devices);
    return set;
  }
  if (backend != "d3d12" && backend != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend=", backend, ": expected cpu, d3d12 or auto"));
  }
#if DMLSERVE_HAVE_D3D12
  set.adapters = FindAdapters();
  const bool explicit_d3d12 = backend == "d3d12";
  absl::Status status = AddD3D12Devices(options, /*allow_software=*/explicit_d3d12, set);
  if (status.ok()) return set;
  if (explicit_d3d12) return status;
  // A user who names adapters wants those adapters: serving on the CPU
  // instead would hide a typo or a missing GPU until someone reads the log.
  // Only an unnamed choice ("whatever D3D12 has, else the CPU") falls back.
  if (!options.adapter_indices.empty()) {
    return absl::Status(status.code(),
                        absl::StrCat("--backend=auto with --devices: ", status.message(),
                                     " (without --devices, auto serves on the CPU instead)"));
  }
  set.note = absl::StrCat("no D3D12 device used (", status.message(), "); serving on the CPU");
  for (AdapterReport& adapter : set.adapters) adapter.used = false;
#else
  if (backend == "d3d12") {
    return absl::UnimplementedError("this build has no D3D12 backend (DMLSERVE_WITH_D3D12=OFF)");
  }
  set.note = "this build has no D3D12 backend; serving on the CPU";
#endif
  set.fallback_devices.clear();
  absl::StatusOr<DeviceList> devices = CreateCpuBackend(options);
  if (!devices.ok()) return devices.status();
  set.devices = *std::move(devices);
  return set;
}

}  // namespace dmlserve
