#ifndef DMLSERVE_KERNELS_D3D12_D3D12_API_H_
#define DMLSERVE_KERNELS_D3D12_D3D12_API_H_

// The one place the D3D12 headers are included. On Windows: d3d12.h from
// Microsoft's DirectX-Headers (<directx/d3d12.h>: vcpkg's directx-headers
// with MSVC, Debian's directx-headers-dev in the mingw-w64 cross-build) and
// dxgi1_6.h from the Windows SDK (or mingw-w64's copy; DirectX-Headers has no
// DXGI). On Linux: vkd3d's own headers, because DirectX-Headers' Linux
// flavour cannot call libvkd3d (below, and docs/d3d12.md).
//
// Linux traps (see the d3d12-on-linux spike's FINDINGS.md):
// - vkd3d's COM headers use the Windows calling convention (ms_abi); the Linux
//   flavour of DirectX-Headers does not and crashes against libvkd3d.
// - In C++ they return aggregates by value unless
//   WIDL_EXPLICIT_AGGREGATE_RETURNS is defined, which GCC then passes the
//   wrong way (crash in GetCPUDescriptorHandleForHeapStart and friends).
// - vkd3d_windows.h defines min()/max() macros: every standard header that
//   needs std::min/std::max must be included before it, and the macros are
//   removed right after.
// - __uuidof is emulated with typeof: the sources need -std=gnu++17.
// - The IID_* objects are defined in exactly one translation unit
//   (d3d12_guids.cc, which defines INITGUID).

// Standard and absl headers first, so no vkd3d macro ever reaches them.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#ifndef WIDL_EXPLICIT_AGGREGATE_RETURNS
#define WIDL_EXPLICIT_AGGREGATE_RETURNS
#endif

#ifdef _WIN32
#ifndef NOMINMAX
#define NOMINMAX
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
// windows.h first: d3d12.h and dxgi need its types.
#include <directx/d3d12.h>
#include <dxgi1_6.h>
// DirectX-Headers' interface IDs for __uuidof where the compiler has no
// __declspec(uuid) (mingw-w64); with MSVC it only checks them.
#include <dxguids/dxguids.h>
#else
#include <vkd3d.h>
#include <vkd3d_utils.h>
#undef min
#undef max
#endif

#endif  // DMLSERVE_KERNELS_D3D12_D3D12_API_H_
