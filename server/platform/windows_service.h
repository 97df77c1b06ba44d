#ifndef DMLSERVE_SERVER_PLATFORM_WINDOWS_SERVICE_H_
#define DMLSERVE_SERVER_PLATFORM_WINDOWS_SERVICE_H_

// Runs the server as a Windows service, the way the Service Control Manager
// (SCM) expects: StartServiceCtrlDispatcher hands the calling thread to the
// SCM, which calls ServiceMain on a thread of its own; ServiceMain registers
// the control handler (RegisterServiceCtrlHandlerEx) and runs the server.
//
// States reported (SetServiceStatus):
//   START_PENDING  until the server reports serving (ServerControl::
//                  ReportServing), with a checkpoint every 500 ms;
//   RUNNING        accepting STOP, PRESHUTDOWN, SHUTDOWN and PARAMCHANGE;
//   STOP_PENDING   from the first STOP, PRESHUTDOWN or SHUTDOWN while the
//                  server drains (work in flight and queued finishes, as on
//                  SIGTERM), with a checkpoint every 500 ms and a wait hint
//                  of options.drain_timeout plus a margin;
//   STOPPED        when the server returned: exit code 0, or
//                  ERROR_SERVICE_SPECIFIC_ERROR with the server's exit code,
//                  which makes the SCM run the service's failure actions.
// PARAMCHANGE (`sc control dmlserve paramchange`) reloads, like SIGHUP.

#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/platform/server_control.h"

namespace dmlserve {

struct WindowsServiceOptions {
  std::string name = "dmlserve";
  // The longest a drain may take (the server's --shutdown_timeout).
  absl::Duration drain_timeout = absl::Seconds(30);
};

// The server: runs until `control` asks it to stop, then drains and returns
// its exit code (0: stopped cleanly).
using ServiceBody = absl::AnyInvocable<int(std::shared_ptr<ServerControl> control)>;

// Serves the SCM until the service stopped. Fails (without running `body`)
// when the process was not started by the SCM. Call once per process.
absl::Status RunAsWindowsService(const WindowsServiceOptions& options, ServiceBody body);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_PLATFORM_WINDOWS_SERVICE_H_
