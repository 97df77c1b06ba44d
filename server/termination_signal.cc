#include "server/termination_signal.h"

#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

namespace dmlserve {

TerminationSignal::TerminationSignal() : state_(std::make_shared<State>()) {
  sigemptyset(&state_->signals);
  sigaddset(&state_->signals, SIGTERM);
  sigaddset(&state_->signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &state_->signals, nullptr);
  // Detached: after the first signal it only waits for a second one, until
  // the process ends.
  std::thread([state = state_] {
    int signal = 0;
    while (sigwait(&state->signals, &signal) != 0) {
    }
    state->received = signal;
    state->notification.Notify();
    while (sigwait(&state->signals, &signal) != 0) {
    }
    std::fprintf(stderr, "dmlserve: second signal %d, exiting without draining\n", signal);
    _exit(128 + signal);
  }).detach();
}

TerminationSignal::~TerminationSignal() = default;

int TerminationSignal::Wait() {
  state_->notification.WaitForNotification();
  return state_->received;
}

}  // namespace dmlserve
