#ifndef DMLSERVE_KERNELS_D3D12_FENCE_EVENT_H_
#define DMLSERVE_KERNELS_D3D12_FENCE_EVENT_H_

// Blocking until a fence reaches a value, with a timeout (a hung device must
// not hang the server).
//
// Windows: a Win32 event. Linux: our own event, not vkd3d-utils': vkd3d 1.2's
// vkd3d_wait_event cannot wait with a timeout ("Timed wait not implemented
// yet", it fails at once). vkd3d signals fence events through the
// instance's pfn_signal_event, so the instance that adapter_enumeration.cc
// creates passes SignalFenceEvent, and a FenceEvent only works with devices
// made by CreateAdapterDevice (not with vkd3d-utils' D3D12CreateDevice).

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/d3d12/d3d12_api.h"

namespace dmlserve::d3d12 {

class FenceEvent {
 public:
  FenceEvent();
  ~FenceEvent();
  FenceEvent(const FenceEvent&) = delete;
  FenceEvent& operator=(const FenceEvent&) = delete;

  bool valid() const { return handle_ != nullptr; }

  // Returns once `fence` has reached `value`. UNAVAILABLE when the fence
  // reports the device lost (completed value UINT64_MAX) or the wait fails;
  // DEADLINE_EXCEEDED after `timeout_ms` (a hung device).
  absl::Status Wait(ID3D12Fence* fence, uint64_t value, uint32_t timeout_ms);

 private:
  HANDLE handle_ = nullptr;
};

#ifndef _WIN32
// vkd3d_instance_create_info::pfn_signal_event for FenceEvent handles.
HRESULT SignalFenceEvent(HANDLE event);
#endif

// The value a fence reports once its device has been removed.
inline constexpr uint64_t kLostFenceValue = ~uint64_t{0};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_FENCE_EVENT_H_
