// ThreadSanitizer and Debian's Abseil.
//
// TSan sees synchronization only in code it instrumented (and in the pthread
// functions it intercepts). Debian's libabsl_synchronization is not built
// with TSan, so absl::Mutex, CondVar, Notification and BlockingCounter are
// invisible to it: every access guarded by an absl::Mutex, in dmlserve and
// in gRPC (whose own locks are absl::Mutex), reads as a data race (4215
// reports in one run of scheduler_test). Abseil built with TSan annotates
// itself; this file adds the same annotations from outside.
//
// It defines the out-of-line members of those classes in the executable.
// The dynamic linker binds every call to them (from dmlserve, gRPC and
// Abseil alike) to the executable's definitions, which tell TSan what the
// call does and forward to the library's own (found with RTLD_NEXT):
//   Lock/TryLock/ReaderLock(...When)  acquire after the call returns
//   Unlock/ReaderUnlock                release before the call
//   Await/CondVar::Wait                release before, acquire after (the
//                                      mutex is given up while waiting)
//   Notify/DecrementCount              release before; waits acquire after
// The release comes before the real unlock so that no other thread can take
// the mutex, in TSan's view, before the writes it guards are published.
// Only the outermost wrapper on a thread annotates: inside the library some
// calls bind to these wrappers again (AwaitWithTimeout calls
// AwaitWithDeadline; Notification locks its private mutex) and some do not
// (a lock seen without its unlock reads as a double lock). Notification and
// BlockingCounter are annotated as the hand-offs they are instead.
// Await/LockWhen conditions run inside another thread's Unlock (after its
// release): each evaluation is bracketed by acquire/release on the mutex, so
// a waiter that wakes sees the evaluation's reads as happened-before. The symbol names carry
// Debian's inline namespace (absl::debian3); a missing one aborts at its first call, naming it.
//
// Linked into every executable of the TSan build only (DMLSERVE_TSAN).

#include <dlfcn.h>
#include <link.h>
#include <sanitizer/tsan_interface.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace {

// The library's definition of `mangled`, the next one after the executable's.
template <typename Fn>
Fn Real(const char* mangled) {
  void* symbol = dlsym(RTLD_NEXT, mangled);
  if (symbol == nullptr) {
    std::fprintf(stderr, "tsan_abseil_annotations: %s not found (Abseil version changed?)\n",
                 mangled);
    std::abort();
  }
  return reinterpret_cast<Fn>(symbol);
}

// Each wrapper's real function, looked up once.
#define DMLSERVE_REAL(type, mangled) static const auto real = Real<type>(mangled);

// The code of gRPC's libraries (libgrpc*, libgpr), loaded at start-up.
std::vector<std::pair<uintptr_t, uintptr_t>> GrpcCode() {
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const char* name = std::strrchr(info->dlpi_name, '/');
        name = name == nullptr ? info->dlpi_name : name + 1;
        if (std::strncmp(name, "libgrpc", 7) != 0 && std::strncmp(name, "libgpr", 6) != 0) {
          return 0;
        }
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& segment = info->dlpi_phdr[i];
          if (segment.p_type != PT_LOAD || (segment.p_flags & PF_X) == 0) continue;
          const uintptr_t start = info->dlpi_addr + segment.p_vaddr;
          static_cast<std::vector<std::pair<uintptr_t, uintptr_t>>*>(out)->emplace_back(
              start, start + segment.p_memsz);
        }
        return 0;
      },
      &ranges);
  return ranges;
}

// gRPC's own locks are left alone. Its memory accesses are invisible to
// TSan anyway, while annotating its mutexes makes TSan check the mutex words
// against their (invisible) initialization: false reports by the hundred.
// dmlserve's callbacks still get their happens-before from dmlserve's locks.
bool CalledFromGrpc(const void* return_address) {
  static const auto* ranges = new std::vector<std::pair<uintptr_t, uintptr_t>>(GrpcCode());
  const auto address = reinterpret_cast<uintptr_t>(return_address);
  for (const auto& [start, end] : *ranges) {
    if (address >= start && address < end) return true;
  }
  return false;
}

// Wrappers on this thread's stack.
thread_local int wrapper_depth = 0;

// Marks a real call in progress; `outermost` says whether to annotate.
class RealCall {
 public:
  explicit RealCall(const void* return_address)
      : outermost_(wrapper_depth++ == 0 && !CalledFromGrpc(return_address)) {}
  ~RealCall() { --wrapper_depth; }
  bool outermost() const { return outermost_; }

 private:
  const bool outermost_;
};

void Acquired(const void* mutex, unsigned flags = 0) {
  __tsan_mutex_pre_lock(const_cast<void*>(mutex), flags);
  __tsan_mutex_post_lock(const_cast<void*>(mutex), flags, 0);
}

void Releasing(const void* mutex, unsigned flags = 0) {
  __tsan_mutex_pre_unlock(const_cast<void*>(mutex), flags);
  __tsan_mutex_post_unlock(const_cast<void*>(mutex), flags);
}

// A condition evaluated as if under `mutex` (see above).
// It lives on the waiter's stack and is read by the thread that evaluates
// it, so its own hand-off is annotated too.
struct GuardedCondition {
  GuardedCondition(const absl::Condition* condition, absl::Mutex* mutex)
      : condition(condition), mutex(mutex) {
    __tsan_release(this);
  }

  const absl::Condition* const condition;
  absl::Mutex* const mutex;

  static bool Eval(void* self) {
    __tsan_acquire(self);
    auto* guarded = static_cast<GuardedCondition*>(self);
    __tsan_acquire(guarded->mutex);
    const bool result = guarded->condition->Eval();
    __tsan_release(guarded->mutex);
    return result;
  }
};

}  // namespace

namespace absl {

// ---- Mutex: locking and unlocking.
void Mutex::Lock() {
  DMLSERVE_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex4LockEv");
  RealCall call(__builtin_return_address(0));
  real(this);
  if (call.outermost()) Acquired(this);
}

bool Mutex::TryLock() {
  DMLSERVE_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex7TryLockEv");
  RealCall call(__builtin_return_address(0));
  const bool locked = real(this);
  if (call.outermost() && locked) Acquired(this);
  return locked;
}

void Mutex::Unlock() {
  DMLSERVE_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex6UnlockEv");
  RealCall call(__builtin_return_address(0));
  if (call.outermost()) Releasing(this);
  real(this);
}

void Mutex::ReaderLock() {
  DMLSERVE_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex10ReaderLockEv");
  RealCall call(__builtin_return_address(0));
  real(this);
  if (call.outermost()) Acquired(this, __tsan_mutex_read_lock);
}

bool Mutex::ReaderTryLock() {
  DMLSERVE_REAL(bool (*)(Mutex*), "_ZN4absl7debian35Mutex13ReaderTryLockEv");
  RealCall call(__builtin_return_address(0));
  const bool locked = real(this);
  if (call.outermost() && locked) Acquired(this, __tsan_mutex_read_lock);
  return locked;
}

void Mutex::ReaderUnlock() {
  DMLSERVE_REAL(void (*)(Mutex*), "_ZN4absl7debian35Mutex12ReaderUnlockEv");
  RealCall call(__builtin_return_address(0));
  if (call.outermost()) Releasing(this, __tsan_mutex_read_lock);
  real(this);
}

// ---- Mutex: locking once a condition holds.
void Mutex::LockWhen(const Condition& condition) {
  DMLSERVE_REAL(void (*)(Mutex*, const Condition&),
                "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE");
  RealCall call(__builtin_return_address(0));
  GuardedCondition guarded(&condition, this);
  real(this, call.outermost() ? Condition(&GuardedCondition::Eval, &guarded) : condition);
  if (call.outermost()) Acquired(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& condition, absl::Duration timeout) {
  DMLSERVE_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
                "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  RealCall call(__builtin_return_address(0));
  GuardedCondition guarded(&condition, this);
  const bool result = real(
      this, call.outermost() ? Condition(&GuardedCondition::Eval, &guarded) : condition, timeout);
  if (call.outermost()) Acquired(this);  // held whatever the result
  return result;
}

bool Mutex::LockWhenWithDeadline(const Condition& condition, absl::Time deadline) {
  DMLSERVE_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
                "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  RealCall call(__builtin_return_address(0));
  GuardedCondition guarded(&condition, this);
  const bool result = real(
      this, call.outermost() ? Condition(&GuardedCondition::Eval, &guarded) : condition, deadline);
  if (call.outermost()) Acquired(this);
  return result;
}

void Mutex::ReaderLockWhen(const Condition& condition) {
  DMLSERVE_REAL(void (*)(Mutex*, const Condition&),
                "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE");
  RealCall call(__builtin_return_address(0));
  GuardedCondition guarded(&condition, this);
  real(this, call.outermost() ? Condition(&GuardedCondition::Eval, &guarded) : condition);
  if (call.outermost()) Acquired(this, __tsan_mutex_read_lock);
}

// ---- Mutex and CondVar: waiting with the lock held (given up meanwhile).
void Mutex::Await(const Condition& condition) {
  DMLSERVE_REAL(void (*)(Mutex*, const Condition&),
                "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE");
  RealCall call(__builtin_return_address(0));
  if (call.outermost()) Releasing(this);
  GuardedCondition guarded(&condition, this);
  real(this, call.outermost() ? Condition(&GuardedCondition::Eval, &guarded) : condition);
  if (call.outermost()) Acquired(this);
}

bool Mutex::AwaitWithTimeout(const Condition& condition, absl::Duration timeout) {
  DMLSERVE_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
                "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  RealCall call(__builtin_return_address(0));
  if (call.outermost()) Releasing(this);
  GuardedCondition guarded(&condition, this);
  const bool result = real(
      this, call.outermost() ? Condition(&GuardedCondition::Eval, &guarded) : condition, timeout);
  if (call.outermost()) Acquired(this);
  return result;
}

bool Mutex::AwaitWithDeadline(const Condition& condition, absl::Time deadline) {
  DMLSERVE_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
                "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  RealCall call(__builtin_return_address(0));
  if (call.outermost()) Releasing(this);
  GuardedCondition guarded(&condition, this);
  const bool result = real(
      this, call.outermost() ? Condition(&GuardedCondition::Eval, &guarded) : condition, deadline);
  if (call.outermost()) Acquired(this);
  return result;
}

void CondVar::Wait(Mutex* mutex) {
  DMLSERVE_REAL(void (*)(CondVar*, Mutex*), "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE");
  RealCall call(__builtin_return_address(0));
  if (call.outermost()) Releasing(mutex);
  real(this, mutex);
  if (call.outermost()) Acquired(mutex);
}

bool CondVar::WaitWithTimeout(Mutex* mutex, absl::Duration timeout) {
  DMLSERVE_REAL(bool (*)(CondVar*, Mutex*, absl::Duration),
                "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  RealCall call(__builtin_return_address(0));
  if (call.outermost()) Releasing(mutex);
  const bool result = real(this, mutex, timeout);
  if (call.outermost()) Acquired(mutex);
  return result;
}

bool CondVar::WaitWithDeadline(Mutex* mutex, absl::Time deadline) {
  DMLSERVE_REAL(bool (*)(CondVar*, Mutex*, absl::Time),
                "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  RealCall call(__builtin_return_address(0));
  if (call.outermost()) Releasing(mutex);
  const bool result = real(this, mutex, deadline);
  if (call.outermost()) Acquired(mutex);
  return result;
}

// Unlocks for gRPC too (its locks are left alone, see CalledFromGrpc).
void ReleasableMutexLock::Release() {
  DMLSERVE_REAL(void (*)(ReleasableMutexLock*), "_ZN4absl7debian319ReleasableMutexLock7ReleaseEv");
  RealCall call(__builtin_return_address(0));
  real(this);
}

// ---- Notification and BlockingCounter: one-way hand-offs.
void Notification::Notify() {
  DMLSERVE_REAL(void (*)(Notification*), "_ZN4absl7debian312Notification6NotifyEv");
  RealCall call(__builtin_return_address(0));
  if (call.outermost()) __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  DMLSERVE_REAL(void (*)(const Notification*),
                "_ZNK4absl7debian312Notification19WaitForNotificationEv");
  RealCall call(__builtin_return_address(0));
  real(this);
  if (call.outermost()) __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  DMLSERVE_REAL(bool (*)(const Notification*, absl::Duration),
                "_ZNK4absl7debian312Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  RealCall call(__builtin_return_address(0));
  const bool notified = real(this, timeout);
  if (call.outermost() && notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  DMLSERVE_REAL(bool (*)(const Notification*, absl::Time),
                "_ZNK4absl7debian312Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  RealCall call(__builtin_return_address(0));
  const bool notified = real(this, deadline);
  if (call.outermost() && notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool BlockingCounter::DecrementCount() {
  DMLSERVE_REAL(bool (*)(BlockingCounter*), "_ZN4absl7debian315BlockingCounter14DecrementCountEv");
  RealCall call(__builtin_return_address(0));
  if (call.outermost()) __tsan_release(this);
  return real(this);
}

void BlockingCounter::Wait() {
  DMLSERVE_REAL(void (*)(BlockingCounter*), "_ZN4absl7debian315BlockingCounter4WaitEv");
  RealCall call(__builtin_return_address(0));
  real(this);
  if (call.outermost()) __tsan_acquire(this);
}

}  // namespace absl

// ~Notification locks its mutex too (to wait out a Notify in progress). A
// destructor cannot be defined here without destroying the members a second
// time, so its symbols are defined as plain functions.
extern "C" void NotificationCompleteDestructor(void* self) __asm__(
    "_ZN4absl7debian312NotificationD1Ev");
extern "C" void NotificationBaseDestructor(void* self) __asm__(
    "_ZN4absl7debian312NotificationD2Ev");

void NotificationCompleteDestructor(void* self) {
  DMLSERVE_REAL(void (*)(void*), "_ZN4absl7debian312NotificationD1Ev");
  RealCall call(__builtin_return_address(0));
  real(self);
}

void NotificationBaseDestructor(void* self) {
  DMLSERVE_REAL(void (*)(void*), "_ZN4absl7debian312NotificationD2Ev");
  RealCall call(__builtin_return_address(0));
  real(self);
}
