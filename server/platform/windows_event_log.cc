#include "server/platform/windows_event_log.h"

#include <windows.h>

#include "absl/strings/str_cat.h"
#include "server/platform/windows_error.h"

namespace dmlserve {
namespace {

// dmlserve_events.mc's message identifiers.
constexpr DWORD kEventInfo = 1;
constexpr DWORD kEventWarning = 2;
constexpr DWORD kEventError = 3;

std::wstring SourceKey(absl::string_view source) {
  return Utf8ToWide(
      absl::StrCat("SYSTEM\\CurrentControlSet\\Services\\EventLog\\Application\\", source));
}

}  // namespace

absl::Status RegisterEventLogSource(absl::string_view source, absl::string_view message_file) {
  HKEY key = nullptr;
  LSTATUS result = RegCreateKeyExW(HKEY_LOCAL_MACHINE, SourceKey(source).c_str(), 0, nullptr,
                                   REG_OPTION_NON_VOLATILE, KEY_SET_VALUE, nullptr, &key, nullptr);
  if (result != ERROR_SUCCESS) {
    return Win32Error(absl::StrCat("registering event log source ", source), result);
  }
  const std::wstring file = Utf8ToWide(message_file);
  const DWORD types = EVENTLOG_ERROR_TYPE | EVENTLOG_WARNING_TYPE | EVENTLOG_INFORMATION_TYPE;
  result = RegSetValueExW(key, L"EventMessageFile", 0, REG_EXPAND_SZ,
                          reinterpret_cast<const BYTE*>(file.c_str()),
                          static_cast<DWORD>((file.size() + 1) * sizeof(wchar_t)));
  if (result == ERROR_SUCCESS) {
    result = RegSetValueExW(key, L"TypesSupported", 0, REG_DWORD,
                            reinterpret_cast<const BYTE*>(&types), sizeof(types));
  }
  RegCloseKey(key);
  if (result != ERROR_SUCCESS) {
    return Win32Error(absl::StrCat("registering event log source ", source), result);
  }
  return absl::OkStatus();
}

absl::Status UnregisterEventLogSource(absl::string_view source) {
  const LSTATUS result = RegDeleteKeyW(HKEY_LOCAL_MACHINE, SourceKey(source).c_str());
  if (result != ERROR_SUCCESS && result != ERROR_FILE_NOT_FOUND) {
    return Win32Error(absl::StrCat("removing event log source ", source), result);
  }
  return absl::OkStatus();
}

absl::Status LogToEventLog(absl::string_view source) {
  HANDLE handle = RegisterEventSourceW(nullptr, Utf8ToWide(source).c_str());
  if (handle == nullptr) return Win32Error(absl::StrCat("opening event log source ", source));
  // The handle stays open for the life of the process, as the sink does.
  AddLogSink([handle](LogSeverity severity, absl::string_view message) {
    const std::wstring text = Utf8ToWide(message);
    const wchar_t* strings[] = {text.c_str()};
    WORD type = EVENTLOG_INFORMATION_TYPE;
    DWORD id = kEventInfo;
    if (severity == LogSeverity::kWarning) {
      type = EVENTLOG_WARNING_TYPE;
      id = kEventWarning;
    } else if (severity == LogSeverity::kError) {
      type = EVENTLOG_ERROR_TYPE;
      id = kEventError;
    }
    ReportEventW(handle, type, /*category=*/0, id, /*user=*/nullptr, 1, 0, strings, nullptr);
  });
  return absl::OkStatus();
}

}  // namespace dmlserve
