#ifndef DMLSERVE_SERVER_BACKEND_DEVICES_H_
#define DMLSERVE_SERVER_BACKEND_DEVICES_H_

// The devices a server runs on, chosen by --backend (the D3D12 backend's
// logical devices themselves come from kernels/d3d12/logical_devices.h).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/backend/device.h"

namespace dmlserve {

struct BackendDeviceOptions {
  int cpu_devices = 1;
  // D3D12 (see kernels/d3d12/d3d12_backend.h).
  std::vector<int> adapter_indices;  // empty: every qualifying adapter
  int d3d12_devices_per_adapter = 1;
  int d3d12_inflight_batches = 4;     // kernels/d3d12/device_runtime.h: kDefaultInflightBatches
  int d3d12_fail_after_batches = -1;  // fault injection for tests
  // Behind D3D12 devices, CPU devices that take over once every D3D12 device
  // has been removed.
  bool cpu_fallback = true;
};

// A GPU adapter found at start-up, for the start-up log and GetServerInfo.
struct AdapterReport {
  int index = 0;
  std::string name;
  bool software = false;
  bool used = false;
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
};

struct DeviceSet {
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<std::unique_ptr<Device>> fallback_devices;
  std::vector<AdapterReport> adapters;
  // Why D3D12 is not used under --backend=auto (empty otherwise).
  std::string note;
};

// Whether this build has the D3D12 backend.
bool HaveD3D12Backend();

// `backend`: "cpu" (the embedded CPU backend), "d3d12" (D3D12 adapters,
// software ones such as lavapipe or WARP included; an error when there is
// none) or "auto" (D3D12 on hardware adapters only, since the CPU backend
// beats a software GPU; CPU otherwise). "auto" with adapter indices named
// (--devices) uses those or fails: it falls back to the CPU only when none
// was named. Never returns an empty device list.
absl::StatusOr<DeviceSet> CreateBackendDevices(absl::string_view backend,
                                               const BackendDeviceOptions& options);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_BACKEND_DEVICES_H_
