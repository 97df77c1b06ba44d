#ifndef DMLSERVE_KERNELS_D3D12_ADAPTER_ENUMERATION_H_
#define DMLSERVE_KERNELS_D3D12_ADAPTER_ENUMERATION_H_

// Which GPUs (adapters) the machine has, and a D3D12 device on one of them.
//
// Windows: DXGI adapters that support D3D12 (feature level 11_0).
// Linux: Vulkan physical devices of one process-wide vkd3d instance, handed
// to vkd3d_create_device; lavapipe (VK_PHYSICAL_DEVICE_TYPE_CPU) is software.
//
// Indices are stable for the process: adapter i is always the same GPU.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/d3d12/com_ptr.h"

// Declared by d3d12.h / vkd3d_d3d12.h; forward-declared here so that this
// header (and the public d3d12_backend.h) stays free of platform headers.
struct ID3D12Device;

namespace dmlserve::d3d12 {

struct AdapterInfo {
  int index = 0;
  std::string name;
  bool software = false;  // lavapipe, WARP: a CPU pretending to be a GPU
  uint32_t vendor_id = 0;
  uint32_t device_id = 0;
};

// UNAVAILABLE when the platform has no D3D12 at all (no Vulkan loader or
// driver on Linux, no DXGI on Windows); an empty list when it has no adapter.
absl::StatusOr<std::vector<AdapterInfo>> EnumerateAdapters();

// A new D3D12 device (feature level 11_0) on adapter `adapter_index`.
// On Windows D3D12 hands out one device per adapter and process, so logical
// devices that share an adapter share this object; each gets its own queue.
absl::StatusOr<ComPtr<ID3D12Device>> CreateAdapterDevice(int adapter_index);

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_ADAPTER_ENUMERATION_H_
