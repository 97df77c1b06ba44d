#include "server/reload_signal.h"

#include <pthread.h>
#include <signal.h>

#include <thread>
#include <utility>

namespace dmlserve {
namespace {

sigset_t HangupSet() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGHUP);
  return signals;
}

}  // namespace

ReloadSignal::ReloadSignal() : state_(std::make_shared<State>()) {
  const sigset_t signals = HangupSet();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

ReloadSignal::~ReloadSignal() { Stop(); }

void ReloadSignal::Stop() {
  absl::MutexLock lock(&state_->mutex);
  state_->stopped = true;
  state_->reload = nullptr;
}

void ReloadSignal::Start(absl::AnyInvocable<void()> reload) {
  {
    absl::MutexLock lock(&state_->mutex);
    state_->reload = std::move(reload);
  }
  std::thread([state = state_] {
    const sigset_t signals = HangupSet();
    for (;;) {
      int signal = 0;
      if (sigwait(&signals, &signal) != 0) continue;
      // The reload runs under the mutex, so the destructor waits for it.
      absl::MutexLock lock(&state->mutex);
      if (state->stopped) continue;  // still taken: SIGHUP must never kill the process
      state->reload();
    }
  }).detach();
}

}  // namespace dmlserve
