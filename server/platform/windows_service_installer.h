#ifndef DMLSERVE_SERVER_PLATFORM_WINDOWS_SERVICE_INSTALLER_H_
#define DMLSERVE_SERVER_PLATFORM_WINDOWS_SERVICE_INSTALLER_H_

// Installs, removes, starts and stops the dmlserve Windows service through
// the Service Control Manager, the way `dmlserve service install|uninstall|
// start|stop` does (service_command.h). Each needs administrator rights.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dmlserve {

struct ServiceInstallation {
  std::string name = "dmlserve";
  std::string display_name = "dmlserve tensor operator server";
  std::string description =
      "Runs tensor operators with DirectML semantics for gRPC clients, on D3D12 GPUs or the CPU.";
  // Full path of the executable, and its arguments when the SCM starts it
  // (`service run --service_name=... <server flags>`).
  std::string executable;
  std::vector<std::string> arguments;
  // The server's --shutdown_timeout: at system shutdown Windows waits this
  // long (plus a margin) for the PRESHUTDOWN drain.
  absl::Duration drain_timeout = absl::Seconds(30);
};

// Creates the service, configured as a production service is expected to be:
//   - runs as its virtual account NT SERVICE\<name> (no password; grant it
//     read access to the tensor repository and TLS files);
//   - starts automatically, delayed until after boot's critical services;
//   - restarts after a failure (a crash or a non-zero exit) after 5 s, 10 s
//     and 30 s, the failure count resetting after a day;
//   - gets PRESHUTDOWN so that it drains before the system goes down;
//   - registers the event log source <name> (windows_event_log.h).
// ALREADY_EXISTS when a service of that name exists.
absl::Status InstallService(const ServiceInstallation& installation);

// Stops the service if it runs (waiting for its drain), deletes it and its
// event log source. NOT_FOUND when there is no such service.
absl::Status UninstallService(absl::string_view name);

// Starts it and waits until it reports RUNNING (or stops: its exit code is
// in the error). Waits as long as its pending checkpoints keep advancing.
absl::Status StartInstalledService(absl::string_view name);
// Asks it to stop and waits until it has drained and reports STOPPED.
absl::Status StopInstalledService(absl::string_view name);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_PLATFORM_WINDOWS_SERVICE_INSTALLER_H_
