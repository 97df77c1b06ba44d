#include "server/drain_gate.h"

namespace dmlserve {

absl::Status DrainGate::Refusal() { return absl::UnavailableError("the server is shutting down"); }

bool DrainGate::TryEnter() {
  absl::MutexLock lock(&mutex_);
  if (draining_) return false;
  ++active_;
  return true;
}

void DrainGate::Exit() {
  absl::MutexLock lock(&mutex_);
  --active_;
}

void DrainGate::BeginDrain() {
  absl::MutexLock lock(&mutex_);
  draining_ = true;
}

bool DrainGate::draining() const {
  absl::MutexLock lock(&mutex_);
  return draining_;
}

bool DrainGate::WaitForIdle(absl::Time deadline) {
  absl::MutexLock lock(&mutex_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return active_ == 0; };
  return mutex_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

int DrainGate::active() const {
  absl::MutexLock lock(&mutex_);
  return active_;
}

}  // namespace dmlserve
