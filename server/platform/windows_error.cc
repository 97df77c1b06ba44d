#include "server/platform/windows_error.h"

#include "absl/strings/str_cat.h"

namespace dmlserve {

std::wstring Utf8ToWide(absl::string_view text) {
  if (text.empty()) return {};
  const int length =
      MultiByteToWideChar(CP_UTF8, 0, text.data(), static_cast<int>(text.size()), nullptr, 0);
  std::wstring wide(static_cast<size_t>(length), L'\0');
  MultiByteToWideChar(CP_UTF8, 0, text.data(), static_cast<int>(text.size()), wide.data(), length);
  return wide;
}

std::string WideToUtf8(const std::wstring& text) {
  if (text.empty()) return {};
  const int length = WideCharToMultiByte(CP_UTF8, 0, text.data(), static_cast<int>(text.size()),
                                         nullptr, 0, nullptr, nullptr);
  std::string narrow(static_cast<size_t>(length), '\0');
  WideCharToMultiByte(CP_UTF8, 0, text.data(), static_cast<int>(text.size()), narrow.data(), length,
                      nullptr, nullptr);
  return narrow;
}

absl::Status Win32Error(absl::string_view what, DWORD code) {
  wchar_t* buffer = nullptr;
  const DWORD length = FormatMessageW(
      FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
      nullptr, code, 0, reinterpret_cast<wchar_t*>(&buffer), 0, nullptr);
  std::string system_message = length > 0 ? WideToUtf8(std::wstring(buffer, length)) : "";
  if (buffer != nullptr) LocalFree(buffer);
  while (!system_message.empty() &&
         (system_message.back() == '\n' || system_message.back() == '\r' ||
          system_message.back() == ' ' || system_message.back() == '.')) {
    system_message.pop_back();
  }
  std::string message = absl::StrCat(what, ": ", system_message.empty() ? "error" : system_message,
                                     " (Win32 error ", code, ")");
  switch (code) {
    case ERROR_ACCESS_DENIED:
      return absl::PermissionDeniedError(message);
    case ERROR_SERVICE_DOES_NOT_EXIST:
    case ERROR_FILE_NOT_FOUND:
      return absl::NotFoundError(message);
    case ERROR_SERVICE_EXISTS:
    case ERROR_DUPLICATE_SERVICE_NAME:
    case ERROR_SERVICE_ALREADY_RUNNING:
      return absl::AlreadyExistsError(message);
    case ERROR_SERVICE_NOT_ACTIVE:
    case ERROR_SERVICE_CANNOT_ACCEPT_CTRL:
    case ERROR_SERVICE_MARKED_FOR_DELETE:
    case ERROR_FAILED_SERVICE_CONTROLLER_CONNECT:
      return absl::FailedPreconditionError(message);
    default:
      return absl::UnknownError(message);
  }
}

}  // namespace dmlserve
