#include <windows.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/platform/log.h"
#include "server/platform/service_command.h"
#include "server/platform/windows_error.h"
#include "server/platform/windows_event_log.h"
#include "server/platform/windows_service.h"
#include "server/platform/windows_service_installer.h"
#include "server/platform/windows_start_report.h"

namespace dmlserve {
namespace {

int Report(const absl::Status& status, absl::string_view done) {
  if (!status.ok()) {
    LogError(status.ToString());
    return 1;
  }
  LogInfo(done);
  return 0;
}

}  // namespace

int RunServiceCommand(const ServiceCommand& command, absl::string_view executable,
                      absl::Duration drain_timeout, ServiceBody body) {
  const std::string& name = command.name;
  if (command.verb == "install") {
    ServiceInstallation installation;
    installation.name = name;
    installation.executable = std::string(executable);
    installation.arguments = {"service", "run", absl::StrCat("--service_name=", name)};
    installation.arguments.insert(installation.arguments.end(), command.server_arguments.begin(),
                                  command.server_arguments.end());
    installation.drain_timeout = drain_timeout;
    return Report(InstallService(installation),
                  absl::StrCat("service ", name, " installed (account NT SERVICE\\", name,
                               "); start it with `service start`"));
  }
  if (command.verb == "uninstall") {
    return Report(UninstallService(name), absl::StrCat("service ", name, " removed"));
  }
  if (command.verb == "start") {
    return Report(StartInstalledService(name), absl::StrCat("service ", name, " running"));
  }
  if (command.verb == "stop") {
    return Report(StopInstalledService(name), absl::StrCat("service ", name, " stopped"));
  }
  // run: the SCM started us. With no console, the event log is where an
  // operator looks; stderr still goes wherever it was redirected.
  if (absl::Status logging = LogToEventLog(name); !logging.ok()) LogWarning(logging.ToString());
  ReportStartTo(name);  // to a `service start` waiting for the outcome
  WindowsServiceOptions options;
  options.name = name;
  options.drain_timeout = drain_timeout;
  absl::Status served = RunAsWindowsService(options, std::move(body));
  if (!served.ok()) {
    LogError(served.ToString());
    return 1;
  }
  return 0;
}

std::string ExecutablePath() {
  std::wstring path(MAX_PATH, L'\0');
  for (;;) {
    const DWORD length = GetModuleFileNameW(nullptr, path.data(), static_cast<DWORD>(path.size()));
    if (length == 0) return {};
    if (length < path.size()) {
      path.resize(length);
      break;
    }
    path.resize(path.size() * 2);
  }
  return WideToUtf8(path);
}

}  // namespace dmlserve
