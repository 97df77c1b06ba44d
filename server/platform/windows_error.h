#ifndef DMLSERVE_SERVER_PLATFORM_WINDOWS_ERROR_H_
#define DMLSERVE_SERVER_PLATFORM_WINDOWS_ERROR_H_

// Small Win32 helpers the Windows parts of the platform seam share: UTF-8 <->
// UTF-16 (the wide API is used throughout, so names and paths with any
// characters work) and Win32 error codes as absl::Status.

#include <windows.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dmlserve {

std::wstring Utf8ToWide(absl::string_view text);
std::string WideToUtf8(const std::wstring& text);

// "<what>: <system message> (Win32 error <code>)", with a status code that
// fits the error (NOT_FOUND for a missing service, PERMISSION_DENIED, ...).
absl::Status Win32Error(absl::string_view what, DWORD code = GetLastError());

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_PLATFORM_WINDOWS_ERROR_H_
