#ifndef DMLSERVE_SERVER_RELOAD_SIGNAL_H_
#define DMLSERVE_SERVER_RELOAD_SIGNAL_H_

// SIGHUP, the conventional "reload your configuration", taken like the
// termination signals (termination_signal.h): blocked in every thread and
// received by one sigwait() thread, which runs the reload as ordinary code.

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace dmlserve {

class ReloadSignal {
 public:
  // Blocks SIGHUP in the calling thread; threads created later inherit the
  // mask. Call it in main() before any thread starts.
  ReloadSignal();
  // Stop()s.
  ~ReloadSignal();

  ReloadSignal(const ReloadSignal&) = delete;
  ReloadSignal& operator=(const ReloadSignal&) = delete;

  // Runs `reload` on the signal thread for every SIGHUP from now on, one at a
  // time. Call once.
  void Start(absl::AnyInvocable<void()> reload);
  // After it returns no reload runs any more (one under way is waited for):
  // what `reload` uses may then go. Later SIGHUPs are taken and ignored.
  void Stop();

 private:
  // Shared with the signal thread, which is detached (sigwait cannot be
  // interrupted portably) and outlives this object.
  struct State {
    absl::Mutex mutex;
    absl::AnyInvocable<void()> reload ABSL_GUARDED_BY(mutex);
    bool stopped ABSL_GUARDED_BY(mutex) = false;
  };
  std::shared_ptr<State> state_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_RELOAD_SIGNAL_H_
