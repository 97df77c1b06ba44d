#ifndef DMLSERVE_SCHEDULER_DEVICE_POOL_H_
#define DMLSERVE_SCHEDULER_DEVICE_POOL_H_

// The devices the scheduler feeds, and the placement policy among them.
//
// Each device has max_inflight_batches() worker threads (owned by the
// scheduler) that pull batches; a batch may also run on the thread that
// submitted it (Device::MayRunOnCallerThread). The pool tracks, per device,
// its health, how many batches it runs and how many of its workers wait for
// work, and decides:
//  - who serves: healthy primary devices; fallback devices (the CPU behind
//    GPUs) only once every primary has failed, so a lost GPU never strands a
//    request and a healthy one is never bypassed (in a mixed pool, below: a
//    fallback serves an operator once no healthy primary runs it);
//  - who takes the next batch, by the pool's Placement:
//     - kLeastLoaded: the serving device running the fewest batches (least
//       outstanding work). Devices pull, so this turns "whoever wakes first"
//       into placement. Fallbacks stay behind the primaries.
//     - kCost: the device where the batch would *finish* first: when one of
//       its workers is free (now, or when its earliest running batch is
//       estimated to end) plus what the batch is estimated to cost there
//       (its CostModel, cost_model.h). Unlike devices are peers: the CPU
//       takes the small batches a GPU would spend its fixed cost on, the GPU
//       the large ones, and each forms batches of what it is good at. (A
//       device that lost its work to a slow spell gets it back as its
//       estimate fades toward its calibration.) Fallbacks join the
//       primaries as peers (they still serve when every GPU is lost).
//       An estimate no batch has confirmed lately (CostModel::Confirmed)
//       may be far off, so a device tries it one batch at a time: while
//       such a trial runs, the device starts no other batch of that
//       operator, and the next one is placed as if queued behind the trial
//       (it waits for the device when even then it finishes first there,
//       as a large product would; a tiny one goes elsewhere). A wrong
//       calibration (lavapipe's, measured on an idle machine, was 100x
//       short under load) then costs one batch, not one per worker;
//  - which operators each device runs (Device::Supports). When every device
//    runs every operator (the usual case, and the fast path), the rules
//    above hold as stated. In a *mixed* pool, where some device serves a
//    subset, loads are not compared (a less loaded device may be one that
//    cannot run the batch), every waiting worker is woken for new work, and
//    each takes only batches of the operators its device serves (ServedBy);
//  - whom to wake: one waiting worker of the device that should take the
//    work, never all of them (on two cores a stampede costs more than it
//    saves);
//  - when a device taken out of rotation comes back: one of its workers
//    probes it (Device::Recover) every reprobe interval, reporting the
//    outcome to the SchedulerObserver.
//
// Not thread-safe: the scheduler guards it with its mutex, which its condition
// variables wait on.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kernels/backend/device.h"
#include "scheduler/cost_model.h"
#include "scheduler/scheduler_observer.h"

namespace dmlserve {

enum class Placement { kLeastLoaded, kCost };

struct DeviceStatus {
  DeviceDescription description;
  bool healthy = true;
  bool fallback = false;
  // What a batch of each operator is estimated to cost there (indexed by
  // OperatorKind): learned from every batch, and calibrated at start-up
  // with Placement::kCost, which places batches by it.
  std::array<CostLine, kOperatorKindCount> costs;
  // Whether a batch measured each estimate lately (CostModel::Confirmed);
  // a batch placed on an unconfirmed one is a trial (DevicePool).
  std::array<bool, kOperatorKindCount> confirmed{};
  uint64_t memory_bytes = 0;
  uint64_t resident_bytes = 0;  // of which registered tensors' resident copies
};

class DevicePool {
 public:
  struct Slot {
    std::unique_ptr<Device> device;
    bool healthy = true;
    bool fallback = false;
    int workers = 1;        // max_inflight_batches(): threads running its batches
    int inflight = 0;       // batches it runs now, on workers or submitting threads (Claim)
    int waiting = 0;        // its workers blocked in Wait
    int wakes_pending = 0;  // of those, signalled and not yet awake
    int exited = 0;         // its workers that left for good (shutdown, no recovery)
    bool probing = false;   // one of its workers is bringing it back (Recover)
    OperatorSet supports;   // Device::Supports, asked once
    CostModel cost;         // kCost: what a batch costs here
    // kCost: when each batch running here is estimated to end, in no order.
    std::vector<absl::Time> running_ends;
    // kCost: per OperatorKind, the trials running here (batches placed on
    // an unconfirmed estimate, see above).
    std::array<int, kOperatorKindCount> trials{};
    // When each waiting worker wakes on its own (InfiniteFuture: only when
    // signalled), in no order.
    std::vector<absl::Time> wait_deadlines;
    absl::CondVar wake;

    bool idle() const { return inflight == 0; }
  };

  // `primary` must not be empty for the scheduler to run anything. With
  // kCost, `fallback` devices join them as peers.
  DevicePool(std::vector<std::unique_ptr<Device>> primary,
             std::vector<std::unique_ptr<Device>> fallback,
             Placement placement = Placement::kLeastLoaded);

  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  size_t size() const { return slots_.size(); }
  Slot& at(size_t index) { return *slots_[index]; }
  const Slot& at(size_t index) const { return *slots_[index]; }

  // The devices are fixed at construction, so these two need no lock:
  // The most memory any device needs to run `operation` beyond its operands
  // and output (Device::WorkingBytes).
  uint64_t MostWorkingBytes(const Operation& operation) const;
  // Drops every device's resident copy of a released registered tensor.
  void Evict(absl::string_view registered_id) const;

  // Each device's health, role and cost estimates at `now`; memory is left
  // to the caller, to read outside the lock (a device counts it under its
  // own locks).
  std::vector<DeviceStatus> Statuses(absl::Time now) const;

  // Whether `slot` takes work at all.
  bool Serves(const Slot& slot) const;
  // The operators `slot` takes now: none when it failed; for a fallback,
  // those it supports that no healthy primary runs.
  OperatorSet ServedBy(const Slot& slot) const;

  // Whether every device supports every operator (see above).
  bool uniform() const { return uniform_; }
  // Whether any device, healthy or not, supports `kind`.
  bool AnySupports(OperatorKind kind) const { return supported_any_.test(Index(kind)); }
  // Whether a device takes `kind` now.
  bool CanServe(OperatorKind kind) const;
  // Why a new job of `kind` cannot be queued (UNAVAILABLE: stopping, no
  // healthy device, or none left that runs `kind`), or OK.
  absl::Status Refusal(OperatorKind kind) const;
  // Whether fallback devices take `kind` in place of failed primaries (then
  // a batch that failed on devices still runs, see the scheduler).
  bool FallbacksServe(OperatorKind kind) const;

  Placement placement() const { return placement_; }

  // Whether `slot` should take a batch: it serves and has a free worker; with
  // kLeastLoaded, no other serving device with a free worker runs fewer
  // batches (with kCost, Prefers decides per batch).
  bool ShouldTake(const Slot& slot) const;

  // kCost: whether `slot` should run a batch of `kind` and `units` of work
  // now: it is where the batch finishes first (see above) and runs no trial
  // of `kind`. `best`, when not null, is set to where the batch finishes
  // first, or null when that device runs a trial of `kind` (it takes the
  // batch once the trial ends; waking it would be in vain). Always true
  // with kLeastLoaded.
  bool Prefers(const Slot& slot, OperatorKind kind, double units, absl::Time now,
               Slot** best = nullptr);
  // kCost: the serving device of `kind` where a batch of `units` finishes
  // first (ties: the first in the pool), counting a device that runs a
  // trial of `kind` free only when all it runs is estimated to end; null
  // when none serves.
  Slot* Best(OperatorKind kind, double units, absl::Time now);
  // kCost: when a worker of `slot` is free: now, or the earliest estimated
  // end of its running batches (never before now).
  absl::Time FreeAt(const Slot& slot, absl::Time now) const;
  // kCost: whether a trial of `kind` runs on `slot` (see above).
  bool OnTrial(const Slot& slot, OperatorKind kind) const { return slot.trials[Index(kind)] > 0; }

  // In a pool where some device serves a subset of the operators, those
  // `slot` takes (ServedBy), so that it looks only at their batches; nullopt
  // (every batch) otherwise.
  std::optional<OperatorSet> OnlyFor(const Slot& slot) const {
    if (uniform_) return std::nullopt;
    return ServedBy(slot);
  }

  // A serving device that runs nothing and supports `kind`, or null: with
  // kLeastLoaded the first such (the least loaded by definition); with kCost,
  // the device where `operation` (the arriving job's; required) finishes
  // first, when that one is idle.
  Slot* IdleSlot(OperatorKind kind, const Operation* operation = nullptr,
                 absl::Time now = absl::InfinitePast());

  // Counts a batch of `kind` and `units` of work as running on `slot` from
  // `now`; `slot` has a free worker (ShouldTake or IdleSlot chose it). With
  // kCost it runs until its estimated end, and is a trial when the estimate
  // is unconfirmed. Every Claim is matched by one Release.
  void Claim(Slot& slot, OperatorKind kind, double units, absl::Time now);
  // What a batch that ran took: its units of work (BatchWorkUnits) and
  // time, ending at `ended`.
  struct Measured {
    double units = 0;
    absl::Duration took;
    absl::Time ended;
  };
  // Counts a batch of `kind` claimed on `slot` as done. `measured`: it ran
  // (null: it failed, or every job had died and the device ran nothing),
  // and the device's cost model learns from it first, so that a trial that
  // ran confirms its estimate.
  void Release(Slot& slot, OperatorKind kind, const Measured* measured = nullptr);
  // Batches running now, on every device.
  int inflight_batches() const { return inflight_batches_; }

  // A worker of `slot` leaves for good (shutdown, or no recovery).
  void WorkerExited(Slot& slot) { ++slot.exited; }

  // Blocks a worker of `slot` on `mu` until woken or `deadline`.
  void Wait(Slot& slot, absl::Mutex* mu, absl::Time deadline);

  // Whether a worker of `slot` will look at the queue by `time` without
  // being woken: one is awake (every worker looks at the queue before it
  // waits), already signalled, or waiting with a deadline no later than
  // `time`.
  bool WillLookBy(const Slot& slot, absl::Time time) const;

  // Wakes one waiting worker that should take work now: one of an idle
  // serving device, or, when `busy_may_take` (a batch a busy device may start
  // is ready, or a new due time must be armed), one of a serving device with
  // room. Does nothing when no such worker waits. In a mixed pool it wakes
  // every waiting worker instead: only they know which batches they can run.
  // With kCost: one of `preferred` (where the work finishes first) when
  // given, else one of each serving device with room (each judges the queue
  // by its own costs).
  void WakeOne(bool busy_may_take, Slot* preferred = nullptr);

  // Wakes every waiting worker (a device failed, or shutdown).
  void WakeAll();

  // From now on, workers waiting for a recovery give up (AwaitRecovery
  // returns false); wakes every waiting worker. Workers waiting for work
  // see stopping() and leave once nothing is left to run.
  void Stop();
  bool stopping() const { return stopping_; }

  // For a worker of the failed `slot`, with `mu` (the mutex guarding this
  // pool) held; `mu` is released while the device recovers and while
  // `observer` (which may be null) hears the outcome. Waits `interval`, and
  // then until no batch of the device runs (its other workers or a
  // submitting thread may still be in Execute), probes it once with
  // Device::Recover and puts it back in rotation when that succeeds. Only
  // one worker of a device probes; the others wait for the outcome. Returns
  // false when the worker should exit instead: the pool stops, `interval`
  // is not positive (probing is off), or the device cannot recover at all
  // (UNIMPLEMENTED). A failed probe is reported (OnDeviceRecoveryFailed)
  // and the device probed again after the next interval.
  bool AwaitRecovery(Slot& slot, absl::Mutex* mu, absl::Duration interval,
                     SchedulerObserver* observer);

  // Takes `slot` out of rotation after `failure`; false when it already was.
  bool MarkFailed(Slot& slot, const absl::Status& failure);
  // Puts a failed `slot` back in rotation (it recovered).
  void MarkRecovered(Slot& slot);

  int healthy() const { return healthy_; }
  // Why the last device failed ("no devices configured" when there are none).
  const std::string& last_failure() const { return last_failure_; }

 private:
  // Signals one not-yet-signalled waiting worker of `slot`; false if none.
  bool Signal(Slot& slot);

  std::vector<std::unique_ptr<Slot>> slots_;  // primaries first; never resized
  int healthy_ = 0;
  int healthy_primary_ = 0;
  std::string last_failure_;
  bool stopping_ = false;
  int inflight_batches_ = 0;
  const Placement placement_;
  static size_t Index(OperatorKind kind) { return static_cast<size_t>(kind); }

  bool uniform_ = true;
  OperatorSet supported_any_;  // AnySupports
  // Per OperatorKind, how many healthy primaries support it.
  int primaries_running_[kOperatorKindCount] = {};
};

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_DEVICE_POOL_H_
