#ifndef DMLSERVE_SERVER_DRAIN_GATE_H_
#define DMLSERVE_SERVER_DRAIN_GATE_H_

// Admits calls until shutdown begins, then lets shutdown wait for the
// admitted ones to finish.
//
// gRPC's own Server::Shutdown(deadline) also waits for idle client
// connections to close, which clients may delay for seconds after the
// GOAWAY; draining the service's calls here first and then shutting gRPC down
// with a short deadline (main.cc, kAnswerFlushGrace: a unary call exits the
// gate when it hands its answer to Finish, and gRPC still has to send it)
// makes a graceful stop take about as long as the work in flight.

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dmlserve {

class DrainGate {
 public:
  // False once draining began: the caller rejects the call with Refusal().
  // Otherwise the call is admitted and the caller must call Exit() when it is
  // done.
  bool TryEnter();
  // What a call refused while draining gets: UNAVAILABLE, which clients take
  // as "try another replica".
  static absl::Status Refusal();
  void Exit();

  void BeginDrain();
  bool draining() const;

  // Waits until no admitted call remains; false if some remain at `deadline`.
  bool WaitForIdle(absl::Time deadline);
  int active() const;

 private:
  mutable absl::Mutex mutex_;
  bool draining_ ABSL_GUARDED_BY(mutex_) = false;
  int active_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_DRAIN_GATE_H_
