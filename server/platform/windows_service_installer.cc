#include "server/platform/windows_service_installer.h"

#include <windows.h>

#include <algorithm>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "server/platform/log.h"
#include "server/platform/service_command.h"
#include "server/platform/windows_error.h"
#include "server/platform/windows_event_log.h"
#include "server/platform/windows_start_report.h"
#include "server/platform/wine_service_managers.h"

namespace dmlserve {
namespace {

struct ServiceHandleCloser {
  void operator()(SC_HANDLE handle) const { CloseServiceHandle(handle); }
};
using ServiceHandle = std::unique_ptr<std::remove_pointer_t<SC_HANDLE>, ServiceHandleCloser>;

absl::Status OpenManager(DWORD access, ServiceHandle& manager) {
  // Under wine, a prefix may run a second service manager that cannot run
  // services (wine_service_managers.h): it goes first, once per process.
  if (std::string stopped = StopDuplicateWineServiceManagers(); !stopped.empty()) {
    LogWarning(stopped);
  }
  manager.reset(OpenSCManagerW(nullptr, nullptr, access));
  if (!manager) return Win32Error("opening the Service Control Manager");
  return absl::OkStatus();
}

absl::Status OpenService(absl::string_view name, DWORD access, ServiceHandle& service) {
  ServiceHandle manager;
  if (absl::Status status = OpenManager(SC_MANAGER_CONNECT, manager); !status.ok()) return status;
  service.reset(OpenServiceW(manager.get(), Utf8ToWide(name).c_str(), access));
  if (!service) return Win32Error(absl::StrCat("opening service ", name));
  return absl::OkStatus();
}

absl::Status Query(SC_HANDLE service, absl::string_view name, SERVICE_STATUS_PROCESS& status) {
  DWORD needed = 0;
  if (!QueryServiceStatusEx(service, SC_STATUS_PROCESS_INFO, reinterpret_cast<BYTE*>(&status),
                            sizeof(status), &needed)) {
    return Win32Error(absl::StrCat("querying service ", name));
  }
  return absl::OkStatus();
}

// Waits while the service is in `pending`, the way Microsoft's samples do: a
// tenth of the wait hint at a time (between 0.1 and 1 s), for as long as the
// checkpoint advances within each wait hint. `poll` runs between queries.
absl::Status WaitWhilePending(
    SC_HANDLE service, absl::string_view name, DWORD pending, SERVICE_STATUS_PROCESS& status,
    absl::FunctionRef<void()> poll = [] {}) {
  if (absl::Status queried = Query(service, name, status); !queried.ok()) return queried;
  DWORD checkpoint = status.dwCheckPoint;
  ULONGLONG progress_at = GetTickCount64();
  while (status.dwCurrentState == pending) {
    Sleep(std::clamp<DWORD>(status.dwWaitHint / 10, 100, 1000));
    poll();
    if (absl::Status queried = Query(service, name, status); !queried.ok()) return queried;
    if (status.dwCheckPoint != checkpoint) {
      checkpoint = status.dwCheckPoint;
      progress_at = GetTickCount64();
    } else if (GetTickCount64() - progress_at > std::max<DWORD>(status.dwWaitHint, 1000)) {
      return absl::DeadlineExceededError(
          absl::StrCat("service ", name, " stopped making progress (checkpoint ", checkpoint,
                       " for longer than its wait hint of ", status.dwWaitHint, " ms)"));
    }
  }
  return absl::OkStatus();
}

std::string ExitCodeText(const SERVICE_STATUS_PROCESS& status) {
  if (status.dwWin32ExitCode == ERROR_SERVICE_SPECIFIC_ERROR) {
    return absl::StrCat("exit code ", status.dwServiceSpecificExitCode);
  }
  return absl::StrCat("Win32 exit code ", status.dwWin32ExitCode);
}

// One ChangeServiceConfig2 setting. Service managers that do not know a
// setting (wine's lacks delayed auto-start and the non-crash failure flag;
// every Windows since Vista has all of them) get a warning, not a failed
// install: the service still runs, without that refinement.
absl::Status SetConfig(SC_HANDLE service, DWORD level, void* info, absl::string_view what) {
  if (ChangeServiceConfig2W(service, level, info)) return absl::OkStatus();
  const DWORD error = GetLastError();
  if (error == ERROR_INVALID_LEVEL) {
    LogWarning(absl::StrCat("this Service Control Manager does not support ", what,
                            "; installed without it"));
    return absl::OkStatus();
  }
  return Win32Error(absl::StrCat("setting ", what), error);
}

absl::Status Configure(SC_HANDLE service, const ServiceInstallation& installation) {
  std::wstring description = Utf8ToWide(installation.description);
  SERVICE_DESCRIPTIONW description_info{description.data()};
  SERVICE_DELAYED_AUTO_START_INFO delayed{TRUE};
  SC_ACTION actions[] = {
      {SC_ACTION_RESTART, 5'000}, {SC_ACTION_RESTART, 10'000}, {SC_ACTION_RESTART, 30'000}};
  SERVICE_FAILURE_ACTIONSW failure{};
  failure.dwResetPeriod = 24 * 60 * 60;  // seconds
  failure.cActions = 3;
  failure.lpsaActions = actions;
  // A server that fails at start-up exits with a non-zero code rather than
  // crashing; it should be restarted too.
  SERVICE_FAILURE_ACTIONS_FLAG on_exit_code{TRUE};
  SERVICE_PRESHUTDOWN_INFO preshutdown{static_cast<DWORD>(
      std::min<int64_t>(absl::ToInt64Milliseconds(installation.drain_timeout), 3'600'000) +
      10'000)};
  for (absl::Status status :
       {SetConfig(service, SERVICE_CONFIG_DESCRIPTION, &description_info, "a description"),
        SetConfig(service, SERVICE_CONFIG_DELAYED_AUTO_START_INFO, &delayed, "delayed auto-start"),
        SetConfig(service, SERVICE_CONFIG_FAILURE_ACTIONS, &failure, "restart-on-failure actions"),
        SetConfig(service, SERVICE_CONFIG_FAILURE_ACTIONS_FLAG, &on_exit_code,
                  "restart on a non-zero exit code"),
        SetConfig(service, SERVICE_CONFIG_PRESHUTDOWN_INFO, &preshutdown,
                  "the pre-shutdown timeout")}) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status InstallService(const ServiceInstallation& installation) {
  ServiceHandle manager;
  if (absl::Status status = OpenManager(SC_MANAGER_CREATE_SERVICE, manager); !status.ok()) {
    return status;
  }
  std::vector<std::string> command_line{installation.executable};
  command_line.insert(command_line.end(), installation.arguments.begin(),
                      installation.arguments.end());
  const std::wstring binary_path = Utf8ToWide(JoinWindowsCommandLine(command_line));
  const std::wstring account = Utf8ToWide(absl::StrCat("NT SERVICE\\", installation.name));
  ServiceHandle service(CreateServiceW(
      manager.get(), Utf8ToWide(installation.name).c_str(),
      Utf8ToWide(installation.display_name).c_str(), SERVICE_ALL_ACCESS, SERVICE_WIN32_OWN_PROCESS,
      SERVICE_AUTO_START, SERVICE_ERROR_NORMAL, binary_path.c_str(),
      /*load_order_group=*/nullptr, /*tag=*/nullptr, /*dependencies=*/nullptr, account.c_str(),
      /*password=*/nullptr));
  if (!service) return Win32Error(absl::StrCat("creating service ", installation.name));
  absl::Status status = Configure(service.get(), installation);
  if (status.ok()) status = RegisterEventLogSource(installation.name, installation.executable);
  if (!status.ok()) {
    // Half-configured services restart or start when they should not.
    DeleteService(service.get());
    return status;
  }
  return absl::OkStatus();
}

absl::Status UninstallService(absl::string_view name) {
  ServiceHandle service;
  if (absl::Status status =
          OpenService(name, SERVICE_STOP | SERVICE_QUERY_STATUS | DELETE, service);
      !status.ok()) {
    return status;
  }
  SERVICE_STATUS_PROCESS status{};
  if (absl::Status queried = Query(service.get(), name, status); !queried.ok()) return queried;
  if (status.dwCurrentState != SERVICE_STOPPED) {
    // A service whose process is gone (StopInstalledService's
    // FAILED_PRECONDITION) has nothing left to stop.
    if (absl::Status stopped = StopInstalledService(name);
        !stopped.ok() && !absl::IsFailedPrecondition(stopped)) {
      return stopped;
    }
  }
  if (!DeleteService(service.get())) return Win32Error(absl::StrCat("deleting service ", name));
  return UnregisterEventLogSource(name);
}

absl::Status StartInstalledService(absl::string_view name) {
  ServiceHandle service;
  if (absl::Status status = OpenService(name, SERVICE_START | SERVICE_QUERY_STATUS, service);
      !status.ok()) {
    return status;
  }
  // The service's own log while it starts, shown here as it comes; its last
  // error says why when it does not start.
  StartReportListener report(name);
  std::string last_error;
  auto show_report = [&report, &last_error] {
    for (const std::string& line : report.TakeLines()) {
      LogInfo(absl::StrCat("service: ", line.size() > 2 ? line.substr(2) : line));
      // Not the service's own closing line ("service stopped with exit code
      // N"), which only repeats the exit code.
      if (line.rfind("E ", 0) == 0 && line.rfind("E service stopped", 0) != 0) {
        last_error = line.substr(2);
      }
    }
  };
  if (!StartServiceW(service.get(), 0, nullptr)) {
    return Win32Error(absl::StrCat("starting service ", name));
  }
  SERVICE_STATUS_PROCESS status{};
  absl::Status waited =
      WaitWhilePending(service.get(), name, SERVICE_START_PENDING, status, show_report);
  show_report();
  if (!waited.ok()) return waited;
  if (status.dwCurrentState != SERVICE_RUNNING) {
    // A failed start-up ends with "service stopped with exit code N": the
    // error before it is the reason.
    return absl::UnavailableError(
        absl::StrCat("service ", name, " did not start: ", ExitCodeText(status), ": ",
                     last_error.empty() ? "the event log has the server's error" : last_error));
  }
  return absl::OkStatus();
}

absl::Status StopInstalledService(absl::string_view name) {
  ServiceHandle service;
  if (absl::Status status = OpenService(name, SERVICE_STOP | SERVICE_QUERY_STATUS, service);
      !status.ok()) {
    return status;
  }
  SERVICE_STATUS plain{};
  if (!ControlService(service.get(), SERVICE_CONTROL_STOP, &plain)) {
    const DWORD error = GetLastError();
    if (error == ERROR_NO_DATA || error == ERROR_BROKEN_PIPE) {
      // The control's pipe to the service process is closed: the process
      // ended without telling the service manager, which still counts the
      // service as running. Windows' notices such an exit itself; wine's
      // does not, and there a crashed service reads RUNNING until started
      // again.
      return absl::FailedPreconditionError(absl::StrCat(
          "service ", name,
          " is not running: its process ended without telling the service manager (a crash: "
          "the event log has the reason); `service start` starts it again"));
    }
    if (error != ERROR_SERVICE_NOT_ACTIVE) {
      return Win32Error(absl::StrCat("stopping service ", name), error);
    }
  }
  SERVICE_STATUS_PROCESS status{};
  if (absl::Status waited = WaitWhilePending(service.get(), name, SERVICE_STOP_PENDING, status);
      !waited.ok()) {
    return waited;
  }
  if (status.dwCurrentState != SERVICE_STOPPED) {
    return absl::UnknownError(
        absl::StrCat("service ", name, " is in state ", status.dwCurrentState, ", not stopped"));
  }
  if (status.dwWin32ExitCode != NO_ERROR) {
    return absl::UnknownError(
        absl::StrCat("service ", name, " stopped with ", ExitCodeText(status)));
  }
  return absl::OkStatus();
}

}  // namespace dmlserve
