#ifndef DMLSERVE_SERVER_PLATFORM_WINDOWS_START_REPORT_H_
#define DMLSERVE_SERVER_PLATFORM_WINDOWS_START_REPORT_H_

// A service's start-up, relayed to the `service start` that asked for it.
//
// A service has no console: why it failed to start (a port in use, a
// repository that does not load) goes to the event log, where an operator
// would have to go and look. So `service start` opens a named pipe,
// \\.\pipe\dmlserve-start-<service name>, before it calls StartService; the
// service, when it finds that pipe, copies its log lines into it until it
// runs or exits, and `service start` prints them as they come and quotes the
// last error when the service did not start.
//
// The pipe is one-way (service to starter), lives only while `service start`
// waits, and only SYSTEM, Administrators and the service's own account
// (NT SERVICE\<name>) may open it. A service started any other way (the SCM
// at boot, sc.exe) finds no pipe and reports to the event log only.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

struct _OVERLAPPED;  // <windows.h>'s OVERLAPPED, kept out of this header

namespace dmlserve {

// `service start`'s end: the pipe, read without blocking (overlapped I/O)
// from the loop that waits for the service's state. Not thread-safe.
class StartReportListener {
 public:
  // Opens the pipe for `service_name`. Never fails: without a pipe (say, a
  // second `service start` already has it) the starter only sees states.
  explicit StartReportListener(absl::string_view service_name);
  // Cancels the pending read and closes the pipe.
  ~StartReportListener();

  StartReportListener(const StartReportListener&) = delete;
  StartReportListener& operator=(const StartReportListener&) = delete;

  // The complete lines received so far and not yet taken, oldest first:
  // "I message", "W message" or "E message" (the severity, then the log line).
  std::vector<std::string> TakeLines();

 private:
  enum class State { kNoPipe, kWaitingForService, kConnected, kDone };

  // Moves `got` bytes of buffer_ into lines.
  void Append(unsigned long got, std::vector<std::string>& lines);

  State state_ = State::kNoPipe;
  void* pipe_ = nullptr;   // HANDLE
  void* event_ = nullptr;  // HANDLE, of the pending operation
  std::unique_ptr<::_OVERLAPPED> overlapped_;
  bool read_pending_ = false;
  char buffer_[4096];
  std::string partial_;  // bytes after the last newline
};

// The service's end. Connects to the pipe of `service_name` if a starter
// waits on it, and from then on copies every log line there (a log sink).
void ReportStartTo(absl::string_view service_name);

// Ends the report: the service runs, or is about to exit. Later log lines go
// to stderr and the event log only. Idempotent.
void EndStartReport();

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_PLATFORM_WINDOWS_START_REPORT_H_
