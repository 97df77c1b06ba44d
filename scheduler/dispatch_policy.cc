#include "scheduler/dispatch_policy.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "absl/container/inlined_vector.h"
#include "scheduler/cost_model.h"

namespace dmlserve {

DispatchPolicy::Arrival DispatchPolicy::Arrive(const Operation& operation, OperatorKind kind,
                                               absl::Time now, const BatchQueue& queue,
                                               DevicePool& pool) {
  Arrival arrival;
  if (pool.placement() == Placement::kCost) {
    // Where it finishes first; it runs at once only there, and only if idle
    // (IdleSlot's rule, without asking Best twice on the request path).
    arrival.preferred = pool.Best(kind, JobWorkUnits(operation) + SharedWorkUnits(operation), now);
    arrival.preferred_on_trial =
        arrival.preferred != nullptr && pool.OnTrial(*arrival.preferred, kind);
    if (options_.arrivals_take_idle_devices && arrival.preferred != nullptr &&
        arrival.preferred->idle()) {
      arrival.idle = arrival.preferred;
    }
  } else if (options_.arrivals_take_idle_devices) {
    arrival.idle = pool.IdleSlot(kind, &operation, now);
  }
  NoteArrival(/*found_work=*/arrival.idle == nullptr || !queue.empty());
  arrival.busy = under_load();
  if (!queue.empty() || arrival.idle == nullptr ||
      !arrival.idle->device->MayRunOnCallerThread(operation)) {
    return arrival;
  }
  // Nothing waits and a device is idle: a cheap job runs right here. Under
  // load, one that pays to run in company waits for it instead.
  if (arrival.busy) arrival.company = arrival.idle->device->PreferredCompany(operation);
  arrival.run_here = arrival.company <= 1;
  return arrival;
}

DispatchPolicy::AfterQueue DispatchPolicy::Queued(const Arrival& arrival, bool was_empty,
                                                  bool was_runnable_for_busy, absl::Time now,
                                                  const BatchQueue& queue, const DevicePool& pool) {
  if (was_empty && queue.holding(now)) ++holds_begun_;
  if (arrival.idle != nullptr) {
    // This arrival completed a held batch (or found older work): it runs the
    // batch here when cheap, as it would have run itself.
    if (queue.HasRunnable(now, /*idle=*/true)) return AfterQueue::kTakeHere;
    // A batch just began its hold: later arrivals end it and wake nobody;
    // the idle device's worker is woken only when it would not look in time.
    if (was_empty && !HoldCovered(*arrival.idle, now, queue, pool)) return AfterQueue::kWakeOne;
    return AfterQueue::kNothing;
  }
  // A busy device with room needs waking only when a batch just became
  // startable for it, or a due time appeared to wait for (and no submitting
  // thread will look at the queue after its batch).
  const bool became_runnable = !was_runnable_for_busy && queue.HasRunnable(now, /*idle=*/false);
  // A device running a trial of the job's operator takes it once the trial
  // ends (on the thread that ran the trial, or one it wakes).
  if (arrival.preferred_on_trial) return AfterQueue::kNothing;
  return became_runnable || (was_empty && caller_loops_ == 0) ? AfterQueue::kWakeOne
                                                              : AfterQueue::kNothing;
}

void DispatchPolicy::WakeForQueue(absl::Time now, const BatchQueue& queue, DevicePool& pool) const {
  const BatchQueue::Upcoming upcoming =
      pool.placement() == Placement::kCost ? queue.UpcomingBatches(now) : BatchQueue::Upcoming();
  if (upcoming.empty()) return pool.WakeOne(/*busy_may_take=*/true);
  absl::InlinedVector<DevicePool::Slot*, BatchQueue::kResidencyWindow> woken;
  for (const Batch* batch : upcoming) {
    DevicePool::Slot* best = pool.Best(batch->key.kind(), BatchWorkUnits(*batch), now);
    // A device running a trial of the batch's operator takes it after the
    // trial, unwoken (see Queued).
    if (best == nullptr || pool.OnTrial(*best, batch->key.kind()) ||
        std::find(woken.begin(), woken.end(), best) != woken.end()) {
      continue;
    }
    woken.push_back(best);
    pool.WakeOne(/*busy_may_take=*/true, best);
  }
}

bool DispatchPolicy::WakeAfterCallerBatch(const DevicePool::Slot& slot, bool continues,
                                          absl::Time now, const BatchQueue& queue,
                                          const DevicePool& pool) const {
  if (queue.empty()) return false;
  // Once this thread stops, all that is left is for the workers (but a hold
  // that a worker looks at in time); meanwhile what a device with room may
  // start now.
  return continues ? queue.HasRunnable(now, /*idle=*/false) : !HoldCovered(slot, now, queue, pool);
}

absl::Time DispatchPolicy::NextLook(const DevicePool::Slot& slot, bool should_take, absl::Time now,
                                    uint64_t& holds_seen, const BatchQueue& queue,
                                    const DevicePool& pool) const {
  const absl::Duration backstop = options_.hold_backstop;
  const bool new_holds = holds_begun_ != holds_seen;
  holds_seen = holds_begun_;
  if (!should_take) return absl::InfiniteFuture();
  const std::optional<OperatorSet> only = pool.OnlyFor(slot);
  // A busy device with room starts the oldest open batch once it is due.
  if (!slot.idle()) return queue.NextDueTime(only);
  // An idle one backs up the held batch: arrivals end its hold, this worker
  // only when none came by the hold's end plus the backstop.
  if (queue.holding(now)) {
    return only.has_value() ? queue.NextDueTime(only) + backstop : queue.hold_end() + backstop;
  }
  // While holds keep beginning, the worker looks every `backstop` rather
  // than being woken for each (HoldCovered); once they stop, it sleeps until
  // woken.
  if (backstop > absl::ZeroDuration() && new_holds) return now + backstop;
  return absl::InfiniteFuture();
}

bool DispatchPolicy::HoldCovered(const DevicePool::Slot& slot, absl::Time now,
                                 const BatchQueue& queue, const DevicePool& pool) const {
  return options_.hold_backstop > absl::ZeroDuration() && !queue.HasRunnable(now, /*idle=*/true) &&
         pool.WillLookBy(slot, queue.hold_end() + options_.hold_backstop);
}

std::unique_ptr<Batch> DispatchPolicy::Take(DevicePool::Slot& slot, absl::Time now,
                                            absl::FunctionRef<bool(const Batch&)> accept,
                                            BatchQueue& queue, DevicePool& pool) const {
  const std::optional<OperatorSet> only = pool.OnlyFor(slot);
  auto allowed = [&](const Batch& candidate) {
    return (!only.has_value() || only->test(static_cast<size_t>(candidate.key.kind()))) &&
           accept(candidate);
  };
  if (pool.placement() != Placement::kCost) {
    return queue.Take(now, slot.idle(), *slot.device, allowed);
  }
  DevicePool::Slot* elsewhere = nullptr;
  std::unique_ptr<Batch> batch =
      queue.Take(now, slot.idle(), *slot.device, [&](const Batch& candidate) {
        if (!allowed(candidate)) return false;
        DevicePool::Slot* best = nullptr;
        if (pool.Prefers(slot, candidate.key.kind(), BatchWorkUnits(candidate), now, &best)) {
          return true;
        }
        if (elsewhere == nullptr) elsewhere = best;
        return false;
      });
  if (batch == nullptr && elsewhere != nullptr) pool.WakeOne(/*busy_may_take=*/true, elsewhere);
  return batch;
}

}  // namespace dmlserve
