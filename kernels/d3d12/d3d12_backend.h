#ifndef DMLSERVE_KERNELS_D3D12_D3D12_BACKEND_H_
#define DMLSERVE_KERNELS_D3D12_D3D12_BACKEND_H_

// The D3D12 backend's entry points for the server: which adapters there are,
// and the devices to hand to the scheduler. Free of platform headers.
//
// Devices are named "d3d12:<n>" in creation order (adapters in index order,
// each adapter's logical devices together); the description is the adapter's
// name. See docs/d3d12.md.

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend/device.h"
#include "kernels/d3d12/adapter_enumeration.h"
#include "kernels/d3d12/device_runtime.h"

namespace dmlserve {

struct D3D12Options {
  std::vector<int> adapter_indices;  // empty = all (flag --devices)
  int devices_per_adapter = 1;       // --d3d12_devices_per_adapter (several logical devices
                                     // on one adapter, each with its own queue)
  bool allow_software = false;       // --backend=d3d12 allows lavapipe/WARP; auto does not
  int inflight_batches_per_device = d3d12::kDefaultInflightBatches;  // --d3d12_inflight_batches
  int fail_after_batches = -1;  // fault injection (tests): each device runs this many batches,
                                // then fails as removed (also DMLSERVE_D3D12_FAIL_AFTER_BATCHES)
  uint32_t batch_timeout_ms = 60000;  // a batch not done by then means a hung device
};

using d3d12::AdapterInfo;
using d3d12::EnumerateAdapters;

// NOT_FOUND when no adapter qualifies (none at all, or only software ones
// without allow_software), INVALID_ARGUMENT for an unknown adapter index or
// a bad count, FAILED_PRECONDITION when an index names a software adapter
// without allow_software, UNAVAILABLE when the platform has no D3D12.
absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateD3D12Devices(
    const D3D12Options& options);

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_D3D12_D3D12_BACKEND_H_
