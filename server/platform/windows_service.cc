#include "server/platform/windows_service.h"

#include <windows.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/platform/log.h"
#include "server/platform/windows_error.h"
#include "server/platform/windows_start_report.h"

namespace dmlserve {
namespace {

// How often a pending state's checkpoint advances. The SCM (and sc.exe,
// services.msc) treat a pending state whose checkpoint stops moving for its
// wait hint as hung.
constexpr DWORD kCheckpointIntervalMs = 500;
// Start-up (devices, the tensor repository) within this, checkpoints aside.
constexpr DWORD kStartWaitHintMs = 30'000;
// Added to the drain's own timeout: after it, gRPC and the scheduler stop.
constexpr DWORD kStopMarginMs = 10'000;

// The one service this process runs. ServiceMain and the control handler
// are plain functions called by the SCM, so they reach it through here.
class Service {
 public:
  Service(const WindowsServiceOptions& options, ServiceBody body)
      : name_(Utf8ToWide(options.name)),
        stop_wait_hint_ms_(static_cast<DWORD>(
            std::min<int64_t>(absl::ToInt64Milliseconds(options.drain_timeout), 3'600'000) +
            kStopMarginMs)),
        body_(std::move(body)),
        control_(std::make_shared<ServerControl>()) {}

  const std::wstring& name() const { return name_; }

  // ServiceMain's work, on the SCM's thread for this service.
  void Main() {
    handle_ = RegisterServiceCtrlHandlerExW(name_.c_str(), &Service::Handler, this);
    if (handle_ == nullptr) {
      LogError(Win32Error("RegisterServiceCtrlHandlerEx").ToString());
      return;
    }
    SetState(SERVICE_START_PENDING, kStartWaitHintMs);
    std::thread ticker([this] { Tick(); });
    const int exit_code = body_(control_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      body_done_ = true;
    }
    done_cv_.notify_all();
    ticker.join();
    if (exit_code == 0) {
      LogInfo("service stopped");
    } else {
      LogError(absl::StrCat("service stopped with exit code ", exit_code));
    }
    EndStartReport();
    SetState(SERVICE_STOPPED, 0, exit_code);
  }

 private:
  static DWORD WINAPI Handler(DWORD control, DWORD /*event_type*/, LPVOID /*event_data*/,
                              LPVOID context) {
    auto* service = static_cast<Service*>(context);
    switch (control) {
      case SERVICE_CONTROL_INTERROGATE:
        return NO_ERROR;
      case SERVICE_CONTROL_STOP:
      case SERVICE_CONTROL_PRESHUTDOWN:
      case SERVICE_CONTROL_SHUTDOWN:
        service->Stop(control == SERVICE_CONTROL_STOP          ? "service STOP"
                      : control == SERVICE_CONTROL_PRESHUTDOWN ? "service PRESHUTDOWN"
                                                               : "service SHUTDOWN");
        return NO_ERROR;
      case SERVICE_CONTROL_PARAMCHANGE: {
        // The handler must return within seconds; a reload may take longer.
        std::thread([control = service->control_] {
          LogInfo("service PARAMCHANGE, reloading");
          control->RequestReload();
        }).detach();
        return NO_ERROR;
      }
      default:
        return ERROR_CALL_NOT_IMPLEMENTED;
    }
  }

  void Stop(const char* reason) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (state_ == SERVICE_STOP_PENDING || state_ == SERVICE_STOPPED) return;
    }
    // Reported before the drain starts, so a `sc query` right after
    // `sc stop` already sees STOP_PENDING.
    SetState(SERVICE_STOP_PENDING, stop_wait_hint_ms_);
    control_->RequestStop(reason);  // the server logs "<reason>, draining"
  }

  // Advances pending states' checkpoints, and turns START_PENDING into
  // RUNNING once the server serves. Ends when the body returned.
  void Tick() {
    for (;;) {
      bool serving = false;
      DWORD state = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (body_done_) return;
        state = state_;
      }
      if (state == SERVICE_START_PENDING) {
        serving =
            control_->WaitUntilServing(absl::Now() + absl::Milliseconds(kCheckpointIntervalMs));
        if (serving) {
          SetState(SERVICE_RUNNING, 0);
          // A service's stdout goes nowhere: where it serves goes to the log.
          const std::string endpoints = control_->serving_endpoints();
          LogInfo(
              absl::StrCat("service running", endpoints.empty() ? "" : ", serving ", endpoints));
          EndStartReport();  // `service start` has its answer
          continue;
        }
        std::lock_guard<std::mutex> lock(mu_);
        if (body_done_) return;
        if (state_ == SERVICE_START_PENDING) Report(SERVICE_START_PENDING, kStartWaitHintMs, 0);
        continue;
      }
      std::unique_lock<std::mutex> lock(mu_);
      if (done_cv_.wait_for(lock, std::chrono::milliseconds(kCheckpointIntervalMs),
                            [this] { return body_done_; })) {
        return;
      }
      if (state_ == SERVICE_STOP_PENDING) Report(SERVICE_STOP_PENDING, stop_wait_hint_ms_, 0);
    }
  }

  void SetState(DWORD state, DWORD wait_hint_ms, int exit_code = 0) {
    std::lock_guard<std::mutex> lock(mu_);
    // Once stopping, a late "serving" must not report RUNNING again.
    if (state == SERVICE_RUNNING && state_ != SERVICE_START_PENDING) return;
    Report(state, wait_hint_ms, exit_code);
  }

  // Caller holds mu_. Pending states advance the checkpoint on every report.
  void Report(DWORD state, DWORD wait_hint_ms, int exit_code) {
    checkpoint_ =
        (state == SERVICE_START_PENDING || state == SERVICE_STOP_PENDING) && state == state_
            ? checkpoint_ + 1
            : (state == SERVICE_RUNNING || state == SERVICE_STOPPED ? 0 : 1);
    state_ = state;
    SERVICE_STATUS status{};
    status.dwServiceType = SERVICE_WIN32_OWN_PROCESS;
    status.dwCurrentState = state;
    status.dwControlsAccepted = state == SERVICE_RUNNING
                                    ? SERVICE_ACCEPT_STOP | SERVICE_ACCEPT_PRESHUTDOWN |
                                          SERVICE_ACCEPT_SHUTDOWN | SERVICE_ACCEPT_PARAMCHANGE
                                    : 0;
    status.dwWin32ExitCode = exit_code == 0 ? NO_ERROR : ERROR_SERVICE_SPECIFIC_ERROR;
    status.dwServiceSpecificExitCode = static_cast<DWORD>(exit_code);
    status.dwCheckPoint = checkpoint_;
    status.dwWaitHint = wait_hint_ms;
    if (!SetServiceStatus(handle_, &status)) {
      LogWarning(Win32Error("SetServiceStatus").ToString());
    }
  }

  const std::wstring name_;
  const DWORD stop_wait_hint_ms_;
  ServiceBody body_;
  const std::shared_ptr<ServerControl> control_;
  SERVICE_STATUS_HANDLE handle_ = nullptr;

  std::mutex mu_;
  std::condition_variable done_cv_;
  DWORD state_ = 0;  // nothing reported yet
  DWORD checkpoint_ = 0;
  bool body_done_ = false;
};

Service* g_service = nullptr;

void WINAPI ServiceMain(DWORD /*argc*/, LPWSTR* /*argv*/) { g_service->Main(); }

}  // namespace

absl::Status RunAsWindowsService(const WindowsServiceOptions& options, ServiceBody body) {
  if (g_service != nullptr) return absl::FailedPreconditionError("a service already runs");
  g_service = new Service(options, std::move(body));  // lives as long as the process
  // The name is ignored for a SERVICE_WIN32_OWN_PROCESS service, but the
  // table must name one.
  std::wstring name = g_service->name();
  SERVICE_TABLE_ENTRYW table[] = {{name.data(), &ServiceMain}, {nullptr, nullptr}};
  if (!StartServiceCtrlDispatcherW(table)) {
    const DWORD error = GetLastError();
    if (error == ERROR_FAILED_SERVICE_CONTROLLER_CONNECT) {
      return absl::FailedPreconditionError(
          "`service run` is what the Service Control Manager starts; it cannot be run from a "
          "console (run the server without `service run`, or use `service start`)");
    }
    return Win32Error("StartServiceCtrlDispatcher", error);
  }
  return absl::OkStatus();
}

}  // namespace dmlserve
