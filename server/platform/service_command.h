#ifndef DMLSERVE_SERVER_PLATFORM_SERVICE_COMMAND_H_
#define DMLSERVE_SERVER_PLATFORM_SERVICE_COMMAND_H_

// `dmlserve service <verb> [--service_name=NAME] [server flags...]`, the
// Windows service's command set (docs/windows.md):
//   install    creates the service (windows_service_installer.h); the server
//              flags given are the ones the service will run with;
//   uninstall  stops it (draining) and deletes it;
//   start      starts it and waits until it serves;
//   stop       stops it and waits until it has drained;
//   run        what the Service Control Manager starts: serves as the service
//              (windows_service.h). Not for a console.
// --service_name (default "dmlserve") names the service, its virtual account
// and its event log source, so one machine can run several instances.
// Elsewhere than on Windows every verb fails with a pointer to systemd.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/platform/windows_service.h"

namespace dmlserve {

struct ServiceCommand {
  std::string verb;
  std::string name = "dmlserve";
  // The arguments after the verb, --service_name removed: the server's own
  // flags, parsed by the caller.
  std::vector<std::string> server_arguments;
};

// Whether argv is a `service ...` command line.
bool IsServiceCommand(int argc, char** argv);

// Parses argv[1] == "service", argv[2] the verb, then the flags. An unknown
// or missing verb, an empty --service_name or server flags given to a verb
// that takes none (uninstall, start, stop) are INVALID_ARGUMENT.
absl::StatusOr<ServiceCommand> ParseServiceCommand(int argc, char** argv);

// Runs `command`. `executable` is this program's full path (install writes
// it into the service's command line); `drain_timeout` is the server's
// --shutdown_timeout; `body` serves (for `run`). Errors are logged; returns
// the process's exit code.
int RunServiceCommand(const ServiceCommand& command, absl::string_view executable,
                      absl::Duration drain_timeout, ServiceBody body);

// This program's full path (GetModuleFileName, /proc/self/exe).
std::string ExecutablePath();

// One command line from arguments, quoted so that Windows' own parsing
// (CommandLineToArgvW, the C runtime) gives each one back as it was.
std::string JoinWindowsCommandLine(const std::vector<std::string>& arguments);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_PLATFORM_SERVICE_COMMAND_H_
