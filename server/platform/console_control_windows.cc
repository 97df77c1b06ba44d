#include <windows.h>

#include <atomic>
#include <memory>
#include <string>
#include <utility>

#include "server/platform/console_control.h"
#include "server/platform/log.h"

namespace dmlserve {
namespace {

// The handler is a plain function: the control it feeds lives here for the
// rest of the process.
std::shared_ptr<ServerControl>* g_control = nullptr;
std::atomic<int> g_requests{0};

const char* EventName(DWORD event) {
  switch (event) {
    case CTRL_C_EVENT:
      return "Ctrl+C";
    case CTRL_BREAK_EVENT:
      return "Ctrl+Break";
    case CTRL_CLOSE_EVENT:
      return "console closed";
    case CTRL_LOGOFF_EVENT:
      return "logoff";
    case CTRL_SHUTDOWN_EVENT:
      return "system shutdown";
    default:
      return "console control event";
  }
}

BOOL WINAPI OnConsoleControl(DWORD event) {
  if (g_requests.fetch_add(1) > 0) {
    LogWarning(std::string("second stop request (") + EventName(event) +
               "), exiting without draining");
    ExitProcess(128 + 2);
  }
  (*g_control)->RequestStop(EventName(event));
  // Handled. For CTRL_CLOSE/LOGOFF/SHUTDOWN Windows ends the process when
  // this returns (after a few seconds at most), so wait here while the
  // server drains: the process exits from main() before the wait ends.
  if (event == CTRL_CLOSE_EVENT || event == CTRL_LOGOFF_EVENT || event == CTRL_SHUTDOWN_EVENT) {
    Sleep(INFINITE);
  }
  return TRUE;
}

}  // namespace

void ListenForConsoleControl(std::shared_ptr<ServerControl> control) {
  g_control = new std::shared_ptr<ServerControl>(std::move(control));
  SetConsoleCtrlHandler(&OnConsoleControl, TRUE);
}

}  // namespace dmlserve
