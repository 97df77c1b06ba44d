#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/platform/console_control.h"
#include "server/platform/log.h"

namespace dmlserve {
namespace {

sigset_t SignalSet(std::initializer_list<int> numbers) {
  sigset_t signals;
  sigemptyset(&signals);
  for (int number : numbers) sigaddset(&signals, number);
  return signals;
}

std::string SignalName(int number) {
  switch (number) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return absl::StrCat("signal ", number);
  }
}

}  // namespace

void ListenForConsoleControl(std::shared_ptr<ServerControl> control) {
  // SIGHUP too: a thread with it unblocked would take it and die.
  const sigset_t all = SignalSet({SIGTERM, SIGINT, SIGHUP});
  pthread_sigmask(SIG_BLOCK, &all, nullptr);

  // Detached, both: sigwait() cannot be interrupted portably, and after the
  // first stop the thread only waits for a second one, until the process ends.
  std::thread([control] {
    const sigset_t stops = SignalSet({SIGTERM, SIGINT});
    int number = 0;
    while (sigwait(&stops, &number) != 0) {
    }
    control->RequestStop(SignalName(number));
    while (sigwait(&stops, &number) != 0) {
    }
    LogWarning(absl::StrCat("second signal (", SignalName(number), "), exiting without draining"));
    _exit(128 + number);
  }).detach();
  std::thread([control = std::move(control)] {
    const sigset_t hangup = SignalSet({SIGHUP});
    for (;;) {
      int number = 0;
      // Taken even when no reload is set: SIGHUP must never kill the process.
      if (sigwait(&hangup, &number) == 0) control->RequestReload();
    }
  }).detach();
}

}  // namespace dmlserve
