#include "kernels/d3d12/hresult.h"

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace dmlserve::d3d12 {
namespace {

// Spelled out rather than taken from the headers: vkd3d's headers lack most
// of them, and this file stays free of platform headers.
constexpr HResult kDeviceRemoved = static_cast<HResult>(0x887a0005);
constexpr HResult kDeviceHung = static_cast<HResult>(0x887a0006);
constexpr HResult kDeviceReset = static_cast<HResult>(0x887a0007);
constexpr HResult kDriverInternalError = static_cast<HResult>(0x887a0020);
constexpr HResult kOutOfMemory = static_cast<HResult>(0x8007000e);

struct KnownCode {
  HResult code;
  const char* name;
};
constexpr KnownCode kKnownCodes[] = {
    {kDeviceRemoved, "DXGI_ERROR_DEVICE_REMOVED"},
    {kDeviceHung, "DXGI_ERROR_DEVICE_HUNG"},
    {kDeviceReset, "DXGI_ERROR_DEVICE_RESET"},
    {kDriverInternalError, "DXGI_ERROR_DRIVER_INTERNAL_ERROR"},
    {static_cast<HResult>(0x887a0001), "DXGI_ERROR_INVALID_CALL"},
    {static_cast<HResult>(0x887a0002), "DXGI_ERROR_NOT_FOUND"},
    {static_cast<HResult>(0x887a0004), "DXGI_ERROR_UNSUPPORTED"},
    {kOutOfMemory, "E_OUTOFMEMORY"},
    {static_cast<HResult>(0x80070057), "E_INVALIDARG"},
    {static_cast<HResult>(0x80004001), "E_NOTIMPL"},
    {static_cast<HResult>(0x80004005), "E_FAIL"},
    {static_cast<HResult>(0x80004002), "E_NOINTERFACE"},
};

}  // namespace

bool IsDeviceLossCode(HResult hr) {
  return hr == kDeviceRemoved || hr == kDeviceHung || hr == kDeviceReset ||
         hr == kDriverInternalError;
}

std::string HResultToString(HResult hr) {
  char hex[16];
  std::snprintf(hex, sizeof(hex), "0x%08x", static_cast<unsigned>(hr));
  for (const KnownCode& known : kKnownCodes) {
    if (known.code == hr) return absl::StrCat(hex, " ", known.name);
  }
  return hex;
}

absl::Status HResultError(HResult hr, absl::string_view what) {
  std::string message = absl::StrCat(what, " failed: ", HResultToString(hr));
  if (IsDeviceLossCode(hr)) return absl::UnavailableError(message);
  if (hr == kOutOfMemory) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

}  // namespace dmlserve::d3d12
