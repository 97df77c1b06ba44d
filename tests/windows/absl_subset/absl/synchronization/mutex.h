// Windows cross-build stand-in for Abseil (see ../../README.md), on
// std::mutex and std::condition_variable.
//
// What it keeps of Abseil's contract:
//  - Await/LockWhen block until their Condition holds, re-evaluating it (with
//    the mutex held) whenever another thread may have changed the state it
//    reads: whenever the mutex is released, by Unlock or by a thread starting
//    to wait on a CondVar or in Await;
//  - CondVar waits may wake spuriously; WaitWithDeadline/WaitWithTimeout
//    return true only once the deadline has passed, and an InfiniteFuture()
//    deadline (or InfiniteDuration() timeout) waits until signalled;
//  - AssertHeld checks that the calling thread holds the mutex.
// ReaderLock takes the mutex exclusively: correct, only less concurrent.
#ifndef DMLSERVE_ABSL_SUBSET_SYNCHRONIZATION_MUTEX_H_
#define DMLSERVE_ABSL_SUBSET_SYNCHRONIZATION_MUTEX_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace absl {

class Condition {
 public:
  template <typename T>
  Condition(bool (*func)(T*), T* arg) : eval_([func, arg] { return func(arg); }) {}
  template <typename T>
  Condition(T* object, bool (T::*method)())
      : eval_([object, method] { return (object->*method)(); }) {}
  template <typename T>
  Condition(const T* object, bool (T::*method)() const)
      : eval_([object, method] { return (object->*method)(); }) {}
  // True once *cond is.
  explicit Condition(const bool* cond) : eval_([cond] { return *cond; }) {}
  // A functor (e.g. a lambda) that outlives the wait.
  template <typename T, typename = decltype(static_cast<bool>(std::declval<const T&>()()))>
  explicit Condition(const T* functor) : eval_([functor] { return (*functor)(); }) {}

  bool Eval() const { return eval_(); }

 private:
  std::function<bool()> eval_;
};

class CondVar;

class Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() {
    mu_.lock();
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }
  bool TryLock() {
    if (!mu_.try_lock()) return false;
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    return true;
  }
  void Unlock() {
    owner_.store(std::thread::id(), std::memory_order_relaxed);
    // Notified before unlocking: once unlocked, the Mutex may be destroyed.
    if (awaiting_ > 0) changed_.notify_all();
    mu_.unlock();
  }
  void ReaderLock() { Lock(); }
  bool ReaderTryLock() { return TryLock(); }
  void ReaderUnlock() { Unlock(); }
  void WriterLock() { Lock(); }
  void WriterUnlock() { Unlock(); }

  // Blocks, releasing the mutex while it waits, until `condition` holds or
  // `deadline` passed; returns whether it holds.
  bool AwaitWithDeadline(const Condition& condition, Time deadline) {
    // Only the first release can publish this thread's changes; notifying on
    // every re-wait would let two awaiters with false conditions wake each
    // other forever.
    for (bool notify = true; !condition.Eval(); notify = false) {
      ++awaiting_;
      const bool timed_out = WaitOn(changed_, deadline, notify);
      --awaiting_;
      if (timed_out) return condition.Eval();
    }
    return true;
  }
  bool AwaitWithTimeout(const Condition& condition, Duration timeout) {
    return AwaitWithDeadline(condition, Now() + timeout);
  }
  void Await(const Condition& condition) { AwaitWithDeadline(condition, InfiniteFuture()); }
  void LockWhen(const Condition& condition) {
    Lock();
    Await(condition);
  }
  bool LockWhenWithDeadline(const Condition& condition, Time deadline) {
    Lock();
    return AwaitWithDeadline(condition, deadline);
  }
  void ReaderLockWhen(const Condition& condition) { LockWhen(condition); }

  void AssertHeld() const {
    if (owner_.load(std::memory_order_relaxed) != std::this_thread::get_id()) std::abort();
  }
  void AssertReaderHeld() const { AssertHeld(); }
  void AssertNotHeld() const {
    if (owner_.load(std::memory_order_relaxed) == std::this_thread::get_id()) std::abort();
  }

 private:
  friend class CondVar;

  // Releases the held mutex, waits on `cv` until notified (or spuriously
  // woken) or `deadline`, and reacquires it. True when it returns because
  // the deadline passed.
  bool WaitOn(std::condition_variable& cv, Time deadline, bool notify_awaiters) {
    if (notify_awaiters && awaiting_ > 0) changed_.notify_all();
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    owner_.store(std::thread::id(), std::memory_order_relaxed);
    bool timed_out = false;
    if (deadline == InfiniteFuture()) {
      cv.wait(lock);
    } else {
      // A wait of at most an hour (so that no chrono conversion can overflow);
      // a longer one comes back early, as a spurious wakeup.
      Duration left = deadline - Now();
      if (left < ZeroDuration()) left = ZeroDuration();
      if (left > Hours(1)) left = Hours(1);
      timed_out = cv.wait_for(lock, std::chrono::nanoseconds(ToInt64Nanoseconds(left))) ==
                      std::cv_status::timeout &&
                  Now() >= deadline;
    }
    lock.release();  // still held, now by this thread again
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    return timed_out;
  }

  std::mutex mu_;
  std::atomic<std::thread::id> owner_{};
  int awaiting_ = 0;                 // threads in Await; guarded by mu_
  std::condition_variable changed_;  // they wait on it
};

class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // `mu` must be held; it is released while waiting and held again on return.
  void Wait(Mutex* mu) { mu->WaitOn(cv_, InfiniteFuture(), true); }
  bool WaitWithDeadline(Mutex* mu, Time deadline) { return mu->WaitOn(cv_, deadline, true); }
  bool WaitWithTimeout(Mutex* mu, Duration timeout) {
    return WaitWithDeadline(mu, Now() + timeout);  // InfiniteDuration(): InfiniteFuture()
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

class MutexLock {
 public:
  explicit MutexLock(Mutex* mu) : mu_(mu) { mu_->Lock(); }
  MutexLock(Mutex* mu, const Condition& condition) : mu_(mu) { mu_->LockWhen(condition); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  ~MutexLock() { mu_->Unlock(); }

 private:
  Mutex* const mu_;
};
using ReaderMutexLock = MutexLock;
using WriterMutexLock = MutexLock;

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_SYNCHRONIZATION_MUTEX_H_
