#ifndef DMLSERVE_SERVER_PLATFORM_CONSOLE_CONTROL_H_
#define DMLSERVE_SERVER_PLATFORM_CONSOLE_CONTROL_H_

// Feeds a ServerControl from the ways an interactive or daemon process is
// told to stop and reload, with no handler running in a restricted context:
//
// POSIX (console_control_posix.cc): SIGTERM and SIGINT request a stop,
//   SIGHUP a reload. The signals are blocked in every thread and taken by
//   sigwait() threads, so the work runs as ordinary code.
// Windows (console_control_windows.cc): Ctrl+C, Ctrl+Break, closing the
//   console, logoff and shutdown request a stop (Windows runs console
//   handlers on a thread of their own). There is no reload signal; a service
//   reloads with `sc control dmlserve paramchange` (windows_service.h).
//
// On both, a second stop request ends the process at once, for an operator
// who does not want to wait for the queue to drain.

#include <memory>

#include "server/platform/server_control.h"

namespace dmlserve {

// Starts listening for the platform's console signals on behalf of
// `control`. Call once, first in main(), before any thread starts: on POSIX
// the blocked signal mask is inherited by threads created later.
void ListenForConsoleControl(std::shared_ptr<ServerControl> control);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_PLATFORM_CONSOLE_CONTROL_H_
