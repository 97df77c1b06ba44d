#ifndef DMLSERVE_SERVER_TERMINATION_SIGNAL_H_
#define DMLSERVE_SERVER_TERMINATION_SIGNAL_H_

// Waits for SIGTERM or SIGINT without a signal handler: the signals are
// blocked in every thread and taken synchronously by one sigwait() thread, so
// shutdown runs as ordinary code rather than in a restricted handler.

#include <csignal>
#include <memory>

#include "absl/synchronization/notification.h"

namespace dmlserve {

class TerminationSignal {
 public:
  // Blocks SIGTERM and SIGINT in the calling thread; threads created after
  // this inherit the mask. Call it first in main(), before any thread starts.
  TerminationSignal();
  ~TerminationSignal();

  TerminationSignal(const TerminationSignal&) = delete;
  TerminationSignal& operator=(const TerminationSignal&) = delete;

  // Blocks until the first SIGTERM or SIGINT; returns its number. A second
  // one ends the process at once (exit code 128 + signal), for an operator
  // who does not want to wait for the queue to drain.
  int Wait();

 private:
  // Shared with the waiting thread, which outlives this object.
  struct State {
    sigset_t signals;
    int received = 0;
    absl::Notification notification;
  };
  std::shared_ptr<State> state_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_TERMINATION_SIGNAL_H_
