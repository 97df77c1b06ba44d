#ifndef DMLSERVE_SCHEDULER_CLOCK_H_
#define DMLSERVE_SCHEDULER_CLOCK_H_

// Where the scheduler's policy reads the time. The server uses the real
// clock; tests of the policy (dispatch_policy.h) and of placement
// (placement.h) use a FakeClock they advance by hand, so that their
// decisions can be stated at exact times with no real sleep.

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dmlserve {

class Clock {
 public:
  virtual ~Clock() = default;
  // Thread-safe.
  virtual absl::Time Now() const = 0;

  // absl::Now(); lives for ever.
  static const Clock* Real();
};

// A clock that moves only when told. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch() + absl::Hours(1)) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration by) {
    absl::MutexLock lock(&mu_);
    now_ += by;
  }
  void Set(absl::Time to) {
    absl::MutexLock lock(&mu_);
    now_ = to;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_CLOCK_H_
