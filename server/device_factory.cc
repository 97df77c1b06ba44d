#include "server/device_factory.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_device.h"

namespace dmlserve {
namespace {

using DeviceList = std::vector<std::unique_ptr<Device>>;

absl::StatusOr<DeviceList> CreateCpuBackend(const DeviceFactoryOptions& options) {
  if (options.cpu_devices < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cpu_devices=", options.cpu_devices, ": at least 1 is needed"));
  }
  DeviceList devices = CreateCpuDevices(options.cpu_devices);
  if (devices.empty()) return absl::InternalError("the CPU backend created no devices");
  return devices;
}

absl::StatusOr<DeviceList> CreateD3D12Backend(const DeviceFactoryOptions& options) {
  return absl::UnimplementedError(
      "the d3d12 backend is not available in this build yet; use --backend=cpu");
}

}  // namespace

absl::StatusOr<DeviceList> CreateDevices(absl::string_view backend,
                                         const DeviceFactoryOptions& options) {
  if (backend == "cpu") return CreateCpuBackend(options);
  if (backend == "d3d12") return CreateD3D12Backend(options);
  if (backend == "auto") {
    absl::StatusOr<DeviceList> devices = CreateD3D12Backend(options);
    if (devices.ok()) return devices;
    return CreateCpuBackend(options);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--backend=", backend, ": expected cpu, d3d12 or auto"));
}

}  // namespace dmlserve
