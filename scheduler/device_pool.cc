#include "scheduler/device_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "kernels/core/check.h"

namespace dmlserve {

DevicePool::DevicePool(std::vector<std::unique_ptr<Device>> primary,
                       std::vector<std::unique_ptr<Device>> fallback, Placement placement)
    : placement_(placement) {
  // Placed by cost, the devices behind the GPUs are their peers.
  const size_t primaries = primary.size() + (placement == Placement::kCost ? fallback.size() : 0);
  for (auto& device : fallback) primary.push_back(std::move(device));
  for (size_t i = 0; i < primary.size(); ++i) {
    auto slot = std::make_unique<Slot>();
    slot->device = std::move(primary[i]);
    slot->fallback = i >= primaries;
    slot->workers = std::max(1, slot->device->max_inflight_batches());
    slots_.push_back(std::move(slot));
  }
  for (const auto& slot : slots_) {
    for (int kind = 0; kind < kOperatorKindCount; ++kind) {
      slot->supports.set(kind, slot->device->Supports(static_cast<OperatorKind>(kind)));
      if (slot->supports.test(kind) && !slot->fallback) ++primaries_running_[kind];
    }
    supported_any_ |= slot->supports;
    uniform_ = uniform_ && slot->supports.all();
  }
  healthy_ = static_cast<int>(slots_.size());
  healthy_primary_ = static_cast<int>(primaries);
  if (slots_.empty()) last_failure_ = "no devices configured";
}

uint64_t DevicePool::MostWorkingBytes(const Operation& operation) const {
  uint64_t most = 0;
  for (const auto& slot : slots_) most = std::max(most, slot->device->WorkingBytes(operation));
  return most;
}

void DevicePool::Evict(absl::string_view registered_id) const {
  for (const auto& slot : slots_) slot->device->Evict(registered_id);
}

std::vector<DeviceStatus> DevicePool::Statuses(absl::Time now) const {
  std::vector<DeviceStatus> statuses;
  for (const auto& slot : slots_) {
    DeviceStatus& status = statuses.emplace_back();
    status.description = slot->device->description();
    status.healthy = slot->healthy;
    status.fallback = slot->fallback;
    for (int kind = 0; kind < kOperatorKindCount; ++kind) {
      status.costs[kind] = slot->cost.LineAt(static_cast<OperatorKind>(kind), now);
      status.confirmed[kind] = slot->cost.Confirmed(static_cast<OperatorKind>(kind), now);
    }
  }
  return statuses;
}

bool DevicePool::Serves(const Slot& slot) const {
  if (uniform_) return slot.healthy && (!slot.fallback || healthy_primary_ == 0);
  return ServedBy(slot).any();
}

OperatorSet DevicePool::ServedBy(const Slot& slot) const {
  if (!slot.healthy) return OperatorSet();
  OperatorSet served = slot.supports;
  if (slot.fallback) {
    for (int kind = 0; kind < kOperatorKindCount; ++kind) {
      if (primaries_running_[kind] > 0) served.reset(kind);
    }
  }
  return served;
}

bool DevicePool::CanServe(OperatorKind kind) const {
  for (const auto& slot : slots_) {
    if (ServedBy(*slot).test(Index(kind))) return true;
  }
  return false;
}

bool DevicePool::FallbacksServe(OperatorKind kind) const {
  if (uniform_) return healthy_primary_ == 0 && healthy_ > 0;
  return primaries_running_[Index(kind)] == 0 && CanServe(kind);
}

bool DevicePool::ShouldTake(const Slot& slot) const {
  if (!Serves(slot) || slot.inflight >= slot.workers) return false;
  if (!uniform_ || placement_ == Placement::kCost) return true;
  for (const auto& other : slots_) {
    if (other.get() != &slot && Serves(*other) && other->inflight < other->workers &&
        other->inflight < slot.inflight) {
      return false;
    }
  }
  return true;
}

void DevicePool::Claim(Slot& slot, OperatorKind kind, double units, absl::Time now) {
  DMLSERVE_DCHECK(slot.inflight < slot.workers);
  ++slot.inflight;
  ++inflight_batches_;
  if (placement_ != Placement::kCost) return;
  slot.running_ends.push_back(now + slot.cost.Estimate(kind, units, now));
  if (!slot.cost.Confirmed(kind, now)) ++slot.trials[Index(kind)];
}

void DevicePool::Release(Slot& slot, OperatorKind kind, const Measured* measured) {
  DMLSERVE_DCHECK(slot.inflight > 0 && inflight_batches_ > 0);
  // Every placement learns, so that the estimates are there to see
  // (metrics) whether or not they place batches.
  if (measured != nullptr) {
    slot.cost.Observe(kind, measured->units, measured->took, measured->ended);
  }
  --slot.inflight;
  --inflight_batches_;
  if (placement_ != Placement::kCost) return;
  // Which of its batches ended is not known here; the earliest estimate is
  // the likeliest, and the estimates are only estimates.
  DMLSERVE_DCHECK(!slot.running_ends.empty());
  slot.running_ends.erase(std::min_element(slot.running_ends.begin(), slot.running_ends.end()));
  // Likewise a trial of `kind` or another batch of it: whichever ended,
  // its measurement now confirms the estimate.
  int& trials = slot.trials[Index(kind)];
  if (trials > 0) --trials;
}

absl::Time DevicePool::FreeAt(const Slot& slot, absl::Time now) const {
  if (slot.inflight < slot.workers || slot.running_ends.empty()) return now;
  return std::max(now, *std::min_element(slot.running_ends.begin(), slot.running_ends.end()));
}

DevicePool::Slot* DevicePool::Best(OperatorKind kind, double units, absl::Time now) {
  Slot* best = nullptr;
  absl::Time best_end = absl::InfiniteFuture();
  for (const auto& slot : slots_) {
    if (!ServedBy(*slot).test(Index(kind))) continue;
    // Behind a trial, the device is free once everything it runs is
    // estimated to end (it starts no other batch of `kind` meanwhile).
    const absl::Time free =
        OnTrial(*slot, kind) && !slot->running_ends.empty()
            ? std::max(now, *std::max_element(slot->running_ends.begin(), slot->running_ends.end()))
            : FreeAt(*slot, now);
    const absl::Time end = free + slot->cost.Estimate(kind, units, now);
    if (best == nullptr || end < best_end) {
      best = slot.get();
      best_end = end;
    }
  }
  return best;
}

bool DevicePool::Prefers(const Slot& slot, OperatorKind kind, double units, absl::Time now,
                         Slot** best) {
  if (placement_ != Placement::kCost) return true;
  Slot* first = Best(kind, units, now);
  const bool waits_for_trial = first != nullptr && OnTrial(*first, kind);
  if (best != nullptr) *best = waits_for_trial ? nullptr : first;
  return first == &slot && !waits_for_trial;
}

DevicePool::Slot* DevicePool::IdleSlot(OperatorKind kind, const Operation* operation,
                                       absl::Time now) {
  if (placement_ == Placement::kCost && operation != nullptr) {
    Slot* best = Best(kind, JobWorkUnits(*operation) + SharedWorkUnits(*operation), now);
    return best != nullptr && best->idle() ? best : nullptr;
  }
  for (const auto& slot : slots_) {
    if (slot->idle() && (uniform_ ? Serves(*slot) : ServedBy(*slot).test(Index(kind)))) {
      return slot.get();
    }
  }
  return nullptr;
}

void DevicePool::Wait(Slot& slot, absl::Mutex* mu, absl::Time deadline) {
  ++slot.waiting;
  slot.wait_deadlines.push_back(deadline);
  slot.wake.WaitWithDeadline(mu, deadline);
  --slot.waiting;
  slot.wait_deadlines.erase(
      std::find(slot.wait_deadlines.begin(), slot.wait_deadlines.end(), deadline));
  // Woken by a signal or not (timeout, spurious wake), this worker is awake:
  // a pending signal it may have consumed must not count as still pending.
  slot.wakes_pending = std::min(slot.wakes_pending, slot.waiting);
  if (slot.wakes_pending > 0) --slot.wakes_pending;
  DMLSERVE_DCHECK(slot.waiting >= 0 && slot.wakes_pending <= slot.waiting);
}

bool DevicePool::WillLookBy(const Slot& slot, absl::Time time) const {
  if (slot.workers - slot.exited > slot.waiting || slot.wakes_pending > 0) return true;
  return std::any_of(slot.wait_deadlines.begin(), slot.wait_deadlines.end(),
                     [time](absl::Time deadline) { return deadline <= time; });
}

bool DevicePool::Signal(Slot& slot) {
  if (slot.waiting <= slot.wakes_pending) return false;
  ++slot.wakes_pending;
  slot.wake.Signal();
  return true;
}

void DevicePool::WakeOne(bool busy_may_take, Slot* preferred) {
  if (!uniform_) return WakeAll();
  if (placement_ == Placement::kCost) {
    if (preferred != nullptr) {
      if (Serves(*preferred) && preferred->inflight < preferred->workers) Signal(*preferred);
      return;
    }
    for (const auto& slot : slots_) {
      if (Serves(*slot) && slot->inflight < slot->workers && (busy_may_take || slot->idle())) {
        Signal(*slot);
      }
    }
    return;
  }
  for (const auto& slot : slots_) {
    if (Serves(*slot) && slot->idle() && Signal(*slot)) return;
  }
  if (!busy_may_take) return;
  // The least loaded device with room, as ShouldTake would pick.
  Slot* best = nullptr;
  for (const auto& slot : slots_) {
    if (Serves(*slot) && slot->inflight < slot->workers && slot->waiting > slot->wakes_pending &&
        (best == nullptr || slot->inflight < best->inflight)) {
      best = slot.get();
    }
  }
  if (best != nullptr) Signal(*best);
}

void DevicePool::WakeAll() {
  for (const auto& slot : slots_) {
    slot->wakes_pending = slot->waiting;
    slot->wake.SignalAll();
  }
}

void DevicePool::Stop() {
  stopping_ = true;
  WakeAll();
}

bool DevicePool::AwaitRecovery(Slot& slot, absl::Mutex* mu, absl::Duration interval,
                               SchedulerObserver* observer) {
  if (stopping_ || interval <= absl::ZeroDuration()) return false;
  if (slot.probing) {
    // Another worker of this device probes; this one waits for the outcome.
    Wait(slot, mu, absl::InfiniteFuture());
    return true;
  }
  slot.probing = true;
  // A batch of the device that ends well wakes nobody: its end is polled.
  const absl::Time due = absl::Now() + interval;
  for (absl::Time now = absl::Now(); !stopping_ && (now < due || slot.inflight > 0);
       now = absl::Now()) {
    Wait(slot, mu, now < due ? due : now + absl::Milliseconds(100));
  }
  if (stopping_) {
    slot.probing = false;
    return false;
  }
  Device* device = slot.device.get();
  mu->Unlock();
  const absl::Status recovered = device->Recover();
  mu->Lock();
  slot.probing = false;
  if (recovered.code() == absl::StatusCode::kUnimplemented) return false;
  if (!recovered.ok()) {
    mu->Unlock();
    if (observer != nullptr)
      observer->OnDeviceRecoveryFailed(device->description().name, recovered);
    mu->Lock();
    return true;
  }
  MarkRecovered(slot);
  const int serving = healthy_;
  // Its other workers, and the queued work it may take.
  WakeAll();
  mu->Unlock();
  if (observer != nullptr) observer->OnDeviceRecovered(device->description().name, serving);
  mu->Lock();
  return true;
}

bool DevicePool::MarkFailed(Slot& slot, const absl::Status& failure) {
  if (!slot.healthy) return false;
  slot.healthy = false;
  --healthy_;
  if (!slot.fallback) {
    --healthy_primary_;
    for (int kind = 0; kind < kOperatorKindCount; ++kind) {
      primaries_running_[kind] -= slot.supports.test(kind);
    }
  }
  DMLSERVE_DCHECK(healthy_ >= 0 && healthy_primary_ >= 0 && healthy_primary_ <= healthy_);
  last_failure_ = absl::StrCat(slot.device->description().name, " failed: ", failure.ToString());
  return true;
}

void DevicePool::MarkRecovered(Slot& slot) {
  if (slot.healthy) return;
  slot.healthy = true;
  ++healthy_;
  if (!slot.fallback) {
    ++healthy_primary_;
    for (int kind = 0; kind < kOperatorKindCount; ++kind) {
      primaries_running_[kind] += slot.supports.test(kind);
    }
  }
  DMLSERVE_DCHECK(healthy_ <= static_cast<int>(slots_.size()));
}

absl::Status DevicePool::Refusal(OperatorKind kind) const {
  if (stopping_) return absl::UnavailableError("the scheduler is shutting down");
  if (healthy_ == 0) {
    return absl::UnavailableError(absl::StrCat("no healthy device left: ", last_failure_));
  }
  if (!uniform_ && !CanServe(kind)) {
    return absl::UnavailableError(
        absl::StrCat("no healthy device left that runs ", OperatorName(kind), ": ", last_failure_));
  }
  return absl::OkStatus();
}

}  // namespace dmlserve
