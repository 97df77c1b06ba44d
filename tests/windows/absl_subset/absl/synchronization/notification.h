// Windows cross-build stand-in for Abseil (see ../../README.md).
//
// A one-shot event: Notify() once, any number of threads wait for it.
#ifndef DMLSERVE_ABSL_SUBSET_SYNCHRONIZATION_NOTIFICATION_H_
#define DMLSERVE_ABSL_SUBSET_SYNCHRONIZATION_NOTIFICATION_H_

#include <atomic>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace absl {

class Notification {
 public:
  Notification() = default;
  explicit Notification(bool prenotify) : notified_(prenotify) {}
  Notification(const Notification&) = delete;
  Notification& operator=(const Notification&) = delete;

  void Notify() {
    MutexLock lock(&mu_);
    if (notified_.load(std::memory_order_relaxed)) std::abort();  // Abseil: a fatal error
    notified_.store(true, std::memory_order_release);
    notified_cv_.SignalAll();
  }
  bool HasBeenNotified() const { return notified_.load(std::memory_order_acquire); }

  void WaitForNotification() const { WaitForNotificationWithDeadline(InfiniteFuture()); }
  bool WaitForNotificationWithTimeout(Duration timeout) const {
    return WaitForNotificationWithDeadline(Now() + timeout);
  }
  // True once notified; false when `deadline` passed first.
  bool WaitForNotificationWithDeadline(Time deadline) const {
    // Always through the mutex: a waiter that returns cannot then destroy
    // the Notification while Notify() still signals.
    MutexLock lock(&mu_);
    while (!notified_.load(std::memory_order_relaxed)) {
      if (notified_cv_.WaitWithDeadline(&mu_, deadline)) break;
    }
    return notified_.load(std::memory_order_relaxed);
  }

 private:
  mutable Mutex mu_;
  mutable CondVar notified_cv_;
  std::atomic<bool> notified_{false};
};

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_SYNCHRONIZATION_NOTIFICATION_H_
