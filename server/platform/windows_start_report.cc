#include "server/platform/windows_start_report.h"

#include <windows.h>
// After windows.h:
#include <sddl.h>

#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/platform/log.h"
#include "server/platform/windows_error.h"

namespace dmlserve {
namespace {

std::wstring PipeName(absl::string_view service_name) {
  return Utf8ToWide(absl::StrCat("\\\\.\\pipe\\dmlserve-start-", service_name));
}

// The SID of NT SERVICE\<name> as a string, or "" when the system cannot say
// (wine, which does not enforce pipe security anyway).
std::wstring ServiceAccountSid(absl::string_view service_name) {
  const std::wstring account = Utf8ToWide(absl::StrCat("NT SERVICE\\", service_name));
  BYTE sid[SECURITY_MAX_SID_SIZE];
  DWORD sid_size = sizeof(sid);
  wchar_t domain[256];
  DWORD domain_size = 256;
  SID_NAME_USE use;
  if (!LookupAccountNameW(nullptr, account.c_str(), sid, &sid_size, domain, &domain_size, &use)) {
    return L"";
  }
  wchar_t* text = nullptr;
  if (!ConvertSidToStringSidW(sid, &text)) return L"";
  std::wstring result(text);
  LocalFree(text);
  return result;
}

// The service's end of the pipe, shared by the log sink and EndStartReport.
std::mutex& ReportMutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
HANDLE report_pipe = INVALID_HANDLE_VALUE;  // guarded by ReportMutex()

}  // namespace

StartReportListener::StartReportListener(absl::string_view service_name)
    : overlapped_(std::make_unique<OVERLAPPED>()) {
  // Only SYSTEM, Administrators and the service itself may open the pipe:
  // what comes through it is printed to the administrator's console.
  std::wstring sddl = L"D:(A;;GA;;;SY)(A;;GA;;;BA)";
  if (std::wstring sid = ServiceAccountSid(service_name); !sid.empty()) {
    sddl += L"(A;;GRGW;;;" + sid + L")";
  }
  PSECURITY_DESCRIPTOR descriptor = nullptr;
  SECURITY_ATTRIBUTES attributes{sizeof(attributes), nullptr, FALSE};
  if (ConvertStringSecurityDescriptorToSecurityDescriptorW(sddl.c_str(), SDDL_REVISION_1,
                                                           &descriptor, nullptr)) {
    attributes.lpSecurityDescriptor = descriptor;
  }
  HANDLE pipe = CreateNamedPipeW(
      PipeName(service_name).c_str(),
      PIPE_ACCESS_INBOUND | FILE_FLAG_OVERLAPPED | FILE_FLAG_FIRST_PIPE_INSTANCE,
      PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS,
      /*max_instances=*/1, /*out_buffer=*/0, /*in_buffer=*/64 * 1024, /*timeout=*/0, &attributes);
  if (descriptor != nullptr) LocalFree(descriptor);
  if (pipe == INVALID_HANDLE_VALUE) return;
  HANDLE event = CreateEventW(nullptr, TRUE, FALSE, nullptr);
  if (event == nullptr) {
    CloseHandle(pipe);
    return;
  }
  pipe_ = pipe;
  event_ = event;
  overlapped_->hEvent = event;
  if (ConnectNamedPipe(pipe, overlapped_.get())) {
    state_ = State::kConnected;
  } else if (GetLastError() == ERROR_IO_PENDING) {
    state_ = State::kWaitingForService;
  } else if (GetLastError() == ERROR_PIPE_CONNECTED) {
    state_ = State::kConnected;
  } else {
    state_ = State::kDone;
  }
}

StartReportListener::~StartReportListener() {
  if (pipe_ == nullptr) return;
  if (state_ == State::kWaitingForService || read_pending_) {
    // The OVERLAPPED must outlive the operation: cancel, then wait for it.
    CancelIoEx(pipe_, overlapped_.get());
    DWORD ignored;
    GetOverlappedResult(pipe_, overlapped_.get(), &ignored, TRUE);
  }
  CloseHandle(pipe_);
  CloseHandle(event_);
}

void StartReportListener::Append(unsigned long got, std::vector<std::string>& lines) {
  partial_.append(buffer_, got);
  for (size_t newline; (newline = partial_.find('\n')) != std::string::npos;) {
    lines.push_back(partial_.substr(0, newline));
    partial_.erase(0, newline + 1);
  }
}

std::vector<std::string> StartReportListener::TakeLines() {
  std::vector<std::string> lines;
  DWORD got = 0;
  if (state_ == State::kWaitingForService) {
    if (GetOverlappedResult(pipe_, overlapped_.get(), &got, FALSE)) {
      state_ = State::kConnected;
    } else {
      if (GetLastError() != ERROR_IO_INCOMPLETE) state_ = State::kDone;
      return lines;
    }
  }
  while (state_ == State::kConnected) {
    if (read_pending_) {
      if (!GetOverlappedResult(pipe_, overlapped_.get(), &got, FALSE)) {
        // Still waiting for bytes; or the service closed its end (it runs,
        // or exited), after everything it wrote was read.
        if (GetLastError() != ERROR_IO_INCOMPLETE) state_ = State::kDone;
        break;
      }
      read_pending_ = false;
      Append(got, lines);
      continue;
    }
    ResetEvent(event_);
    if (ReadFile(pipe_, buffer_, sizeof(buffer_), &got, overlapped_.get())) {
      Append(got, lines);
    } else if (GetLastError() == ERROR_IO_PENDING) {
      read_pending_ = true;
    } else {
      state_ = State::kDone;
    }
  }
  return lines;
}

void ReportStartTo(absl::string_view service_name) {
  HANDLE pipe = CreateFileW(PipeName(service_name).c_str(), GENERIC_WRITE, 0, nullptr,
                            OPEN_EXISTING, 0, nullptr);
  if (pipe == INVALID_HANDLE_VALUE) return;  // nobody waits: a boot-time start, sc.exe
  {
    std::lock_guard<std::mutex> lock(ReportMutex());
    report_pipe = pipe;
  }
  AddLogSink([](LogSeverity severity, absl::string_view message) {
    std::lock_guard<std::mutex> lock(ReportMutex());
    if (report_pipe == INVALID_HANDLE_VALUE) return;
    const char* tag = severity == LogSeverity::kError     ? "E "
                      : severity == LogSeverity::kWarning ? "W "
                                                          : "I ";
    const std::string line = absl::StrCat(tag, message, "\n");
    DWORD written = 0;
    if (!WriteFile(report_pipe, line.data(), static_cast<DWORD>(line.size()), &written, nullptr)) {
      // The starter gave up waiting: report to the event log only.
      CloseHandle(report_pipe);
      report_pipe = INVALID_HANDLE_VALUE;
    }
  });
}

void EndStartReport() {
  std::lock_guard<std::mutex> lock(ReportMutex());
  if (report_pipe == INVALID_HANDLE_VALUE) return;
  // What was written stays readable at the starter's end after this.
  CloseHandle(report_pipe);
  report_pipe = INVALID_HANDLE_VALUE;
}

}  // namespace dmlserve
