#ifndef DMLSERVE_KERNELS_D3D12_HRESULT_H_
#define DMLSERVE_KERNELS_D3D12_HRESULT_H_

// HRESULTs turned into absl::Status, and the codes that mean the device is gone.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dmlserve::d3d12 {

// HRESULT is a 32-bit signed integer on every platform; taking it as int32_t
// keeps this header free of the D3D12 headers.
using HResult = int32_t;

// The DXGI codes for a lost device (removed, hung, reset, driver error).
bool IsDeviceLossCode(HResult hr);

// "0x887a0005 DXGI_ERROR_DEVICE_REMOVED" (the name only for codes we know).
std::string HResultToString(HResult hr);

// `what` failed with `hr`. Device-loss codes give UNAVAILABLE (the caller
// takes the device out of rotation), E_OUTOFMEMORY gives RESOURCE_EXHAUSTED,
// anything else INTERNAL.
absl::Status HResultError(HResult hr, absl::string_view what);

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_HRESULT_H_
