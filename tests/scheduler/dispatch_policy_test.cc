// The latency policy on its own, on one thread and a fake clock: every
// decision of dispatch_policy.h (run here, hold, wake, when to look) at exact
// times, with no worker, no thread and no real sleep. The harness does what
// Scheduler::Submit does with the answers (queue the job, take a batch here,
// count a batch running), and sets the workers' waits by hand to the states
// the scheduler's threads would bring about, as device_pool_test does.

#include "scheduler/dispatch_policy.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "scheduler/batch_queue.h"
#include "scheduler/clock.h"
#include "scheduler/compatibility_key.h"
#include "scheduler/device_pool.h"
#include "tests/scheduler/test_device.h"
#include "tests/scheduler/test_jobs.h"

namespace dmlserve {
namespace {

namespace t = ::dmlserve::testing;

constexpr DataType kF32 = DataType::kFloat32;
constexpr absl::Duration kDelay = absl::Microseconds(200);
constexpr absl::Duration kBackstop = absl::Microseconds(1000);
constexpr absl::Duration kUs = absl::Microseconds(1);
// What the batch that keeps the device busy computes (the pool here places
// by load, so only its count matters).
constexpr OperatorKind kBusyKind = OperatorKind::kCumulativeSummation;

using Next = DispatchPolicy::AfterQueue;

class DispatchPolicyTest : public ::testing::Test {
 protected:
  explicit DispatchPolicyTest(absl::Duration backstop = kBackstop)
      : queue_({64, 1ull << 30, kDelay}), policy_({backstop, true}) {
    auto device = std::make_unique<t::TestDevice>("test:0");
    device_ = device.get();
    device_->RunOnCallerThread(true);
    std::vector<std::unique_ptr<Device>> devices;
    devices.push_back(std::move(device));
    pool_ =
        std::make_unique<DevicePool>(std::move(devices), std::vector<std::unique_ptr<Device>>{});
    // The device's one worker sleeps until woken (as after start-up).
    Sleeps(absl::InfiniteFuture());
  }

  DevicePool::Slot& slot() { return pool_->at(0); }

  // The worker waits until `deadline` (InfiniteFuture: until woken).
  void Sleeps(absl::Time deadline) {
    slot().waiting = 1;
    slot().wakes_pending = 0;
    slot().wait_deadlines = {deadline};
  }

  // What Submit does at clock_.Now() with a scan tagged `tag`: the arrival's
  // plan and, when queued, the next step.
  struct Outcome {
    DispatchPolicy::Arrival arrival;
    Next next = Next::kNothing;
  };
  Outcome Arrive(float tag) {
    const absl::Time now = clock_.Now();
    std::shared_ptr<Job> job = t::NewJob(t::ScanOf(kF32, {2}, tag))->job;
    job->enqueue_time = now;
    Outcome outcome;
    outcome.arrival = policy_.Arrive(job->operation, KindOf(job->operation), now, queue_, *pool_);
    if (outcome.arrival.run_here) return outcome;
    const bool was_empty = queue_.empty();
    const bool was_runnable_for_busy = queue_.HasRunnable(now, /*idle=*/false);
    CompatibilityKey key = CompatibilityKey::For(job->operation);
    queue_.Add(job, std::move(key), OperationBytes(job->operation), outcome.arrival.company);
    outcome.next =
        policy_.Queued(outcome.arrival, was_empty, was_runnable_for_busy, now, queue_, *pool_);
    return outcome;
  }

  // Under sustained load: arrivals that each find the device busy.
  void MakeLoad() {
    pool_->Claim(slot(), kBusyKind, 0, clock_.Now());
    for (int i = 0; i < 16; ++i) {
      ASSERT_FALSE(Arrive(100 + i).arrival.run_here);
      queue_.Take(clock_.Now(), /*idle=*/false, *device_, [](const Batch&) { return true; });
      queue_.RemoveAll();
    }
    pool_->Release(slot(), kBusyKind);
    ASSERT_TRUE(policy_.under_load());
  }

  t::TestDevice* device_;
  FakeClock clock_;
  BatchQueue queue_;
  std::unique_ptr<DevicePool> pool_;
  DispatchPolicy policy_;
};

TEST_F(DispatchPolicyTest, AtLowLoadACheapJobRunsOnTheSubmittingThreadAndNeverWaits) {
  device_->PreferCompany(8);  // ignored at low load
  for (int i = 0; i < 100; ++i) {
    const Outcome outcome = Arrive(i);
    EXPECT_TRUE(outcome.arrival.run_here) << i;
    EXPECT_EQ(outcome.arrival.idle, &slot());
    EXPECT_EQ(outcome.arrival.company, 0);
    EXPECT_FALSE(outcome.arrival.busy);
    clock_.Advance(50 * kUs);
  }
  EXPECT_EQ(policy_.holds_begun(), 0u);
}

TEST_F(DispatchPolicyTest, TheSixthArrivalInARowToFindWorkTurnsTheLoadSignalOn) {
  // The signal is a moving average over ~8 arrivals, on at one half:
  // 1 - (7/8)^k crosses 1/2 at k = 6.
  pool_->Claim(slot(), kBusyKind, 0, clock_.Now());
  for (int k = 1; k <= 6; ++k) {
    EXPECT_EQ(Arrive(k).arrival.busy, k >= 6) << k;
  }
  pool_->Release(slot(), kBusyKind);
  queue_.RemoveAll();
  // Arrivals that find the device idle and nothing waiting turn it off again.
  int arrivals = 0;
  while (policy_.under_load()) {
    EXPECT_TRUE(Arrive(0).arrival.run_here);
    ++arrivals;
  }
  EXPECT_LE(arrivals, 6);
}

TEST_F(DispatchPolicyTest, UnderLoadAJobThatPaysToWaitHoldsItsBatchForExactlyTheDelay) {
  MakeLoad();
  device_->PreferCompany(3);
  const absl::Time t0 = clock_.Now();
  const Outcome first = Arrive(1);
  EXPECT_FALSE(first.arrival.run_here);
  EXPECT_EQ(first.arrival.company, 3);
  EXPECT_TRUE(queue_.holding(t0));
  EXPECT_EQ(queue_.hold_end(), t0 + kDelay);
  EXPECT_EQ(policy_.holds_begun(), 1u);
  // The worker sleeps until woken, so it would not see the hold end: it is
  // woken now, and then wakes on its own at the hold's end plus the backstop.
  EXPECT_EQ(first.next, Next::kWakeOne);
  uint64_t seen = 0;
  EXPECT_EQ(policy_.NextLook(slot(), /*should_take=*/true, t0, seen, queue_, *pool_),
            t0 + kDelay + kBackstop);
  EXPECT_EQ(seen, 1u);
  // The hold is not over one microsecond before its end...
  clock_.Set(t0 + kDelay - kUs);
  EXPECT_FALSE(queue_.HasRunnable(clock_.Now(), /*idle=*/true));
  // ...and is at its end, for the worker's look.
  EXPECT_TRUE(queue_.HasRunnable(t0 + kDelay, /*idle=*/true));
}

TEST_F(DispatchPolicyTest, AWorkerThatWillLookInTimeIsNotWokenForAHold) {
  MakeLoad();
  device_->PreferCompany(3);
  const absl::Time t0 = clock_.Now();
  // The worker looks again by t0 + delay + backstop: no wake needed.
  Sleeps(t0 + kDelay + kBackstop);
  EXPECT_EQ(Arrive(1).next, Next::kNothing);
  // One microsecond later than that, and it must be woken.
  queue_.RemoveAll();
  clock_.Advance(kUs);
  Sleeps(clock_.Now() + kDelay + kBackstop + kUs);
  EXPECT_EQ(Arrive(2).next, Next::kWakeOne);
}

TEST_F(DispatchPolicyTest, TheArrivalThatCompletesTheCompanyRunsTheBatchHere) {
  MakeLoad();
  device_->PreferCompany(3);
  Sleeps(absl::InfiniteFuture());
  const absl::Time t0 = clock_.Now();
  Arrive(1);
  clock_.Advance(40 * kUs);
  const Outcome second = Arrive(2);
  EXPECT_EQ(second.arrival.idle, &slot());
  EXPECT_EQ(second.next, Next::kNothing);  // 2 of 3: still held
  EXPECT_TRUE(queue_.holding(clock_.Now()));
  clock_.Advance(40 * kUs);
  EXPECT_EQ(Arrive(3).next, Next::kTakeHere);
  std::unique_ptr<Batch> batch =
      queue_.Take(clock_.Now(), /*idle=*/true, *device_, [](const Batch&) { return true; });
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->jobs.size(), 3u);
  EXPECT_EQ(batch->created, t0);
}

TEST_F(DispatchPolicyTest, TheFirstArrivalAfterTheHoldEndsRunsItHereCompanyOrNot) {
  MakeLoad();
  device_->PreferCompany(3);
  Arrive(1);
  clock_.Advance(kDelay);  // exactly the end
  const Outcome late = Arrive(2);
  EXPECT_EQ(late.next, Next::kTakeHere);
  EXPECT_EQ(
      queue_.Take(clock_.Now(), true, *device_, [](const Batch&) { return true; })->jobs.size(),
      2u);
}

TEST_F(DispatchPolicyTest, WhileHoldsKeepBeginningTheIdleWorkerLooksEveryBackstop) {
  MakeLoad();
  device_->PreferCompany(3);
  uint64_t seen = policy_.holds_begun();
  Arrive(1);
  clock_.Advance(kDelay);
  queue_.Take(clock_.Now(), true, *device_, [](const Batch&) { return true; });
  // A hold began since its last look: it looks again one backstop from now.
  const absl::Time now = clock_.Now();
  EXPECT_EQ(policy_.NextLook(slot(), true, now, seen, queue_, *pool_), now + kBackstop);
  // No new hold by then: it sleeps until woken.
  clock_.Advance(kBackstop);
  EXPECT_EQ(policy_.NextLook(slot(), true, clock_.Now(), seen, queue_, *pool_),
            absl::InfiniteFuture());
  // And so the next hold wakes it (it would not look in time otherwise).
  Sleeps(absl::InfiniteFuture());
  EXPECT_EQ(Arrive(2).next, Next::kWakeOne);
}

TEST_F(DispatchPolicyTest, ABusyDeviceWithRoomLooksWhenTheOldestBatchFallsDue) {
  device_->RunOnCallerThread(false);
  pool_->Claim(slot(), kBusyKind, 0, clock_.Now());  // busy
  const absl::Time t0 = clock_.Now();
  // Nothing runs on a submitting thread and no worker is looking: the
  // arrival wakes one to arm the due time.
  EXPECT_EQ(Arrive(1).next, Next::kWakeOne);
  uint64_t seen = 0;
  clock_.Advance(10 * kUs);
  EXPECT_EQ(policy_.NextLook(slot(), true, clock_.Now(), seen, queue_, *pool_), t0 + kDelay);
  // A second job of the same key adds nothing to wait for.
  EXPECT_EQ(Arrive(2).next, Next::kNothing);
  // While a submitting thread runs batches, it looks at the queue after each
  // one: a new due time wakes nobody.
  queue_.RemoveAll();
  policy_.CallerLoopBegins();
  EXPECT_EQ(Arrive(3).next, Next::kNothing);
  policy_.CallerLoopEnds();
  pool_->Release(slot(), kBusyKind);
}

TEST_F(DispatchPolicyTest, ACallerThreadWakesAWorkerForWhatItLeaves) {
  device_->RunOnCallerThread(false);
  pool_->Claim(slot(), kBusyKind, 0, clock_.Now());
  Arrive(1);
  const absl::Time now = clock_.Now();
  // Still running batches itself: a worker only for what a busy device may
  // start now (nothing is due yet).
  EXPECT_FALSE(policy_.WakeAfterCallerBatch(slot(), /*continues=*/true, now, queue_, *pool_));
  EXPECT_TRUE(policy_.WakeAfterCallerBatch(slot(), true, now + kDelay, queue_, *pool_));
  // Stopping: everything left needs a worker.
  EXPECT_TRUE(policy_.WakeAfterCallerBatch(slot(), /*continues=*/false, now, queue_, *pool_));
  queue_.RemoveAll();
  EXPECT_FALSE(policy_.WakeAfterCallerBatch(slot(), false, now, queue_, *pool_));
  pool_->Release(slot(), kBusyKind);
}

class DispatchPolicyWithoutBackstopTest : public DispatchPolicyTest {
 protected:
  DispatchPolicyWithoutBackstopTest() : DispatchPolicyTest(absl::ZeroDuration()) {}
};

TEST_F(DispatchPolicyWithoutBackstopTest, TheWorkerTimesEveryHoldItself) {
  MakeLoad();
  device_->PreferCompany(3);
  const absl::Time t0 = clock_.Now();
  // Even a worker that would look in time is woken, to arm the hold's end.
  Sleeps(t0);
  EXPECT_EQ(Arrive(1).next, Next::kWakeOne);
  uint64_t seen = 0;
  EXPECT_EQ(policy_.NextLook(slot(), true, t0, seen, queue_, *pool_), t0 + kDelay);
}

TEST(DispatchPolicyFaultInjectionTest, UnderInjectedDelayNoArrivalFindsAnIdleDevice) {
  BatchQueue queue({64, 1ull << 30, kDelay});
  auto device = std::make_unique<t::TestDevice>("test:0");
  device->RunOnCallerThread(true);
  std::vector<std::unique_ptr<Device>> devices;
  devices.push_back(std::move(device));
  DevicePool pool(std::move(devices), {});
  DispatchPolicy policy({kBackstop, /*arrivals_take_idle_devices=*/false});
  const Operation scan = t::ScanOf(kF32, {2}, 1);
  const DispatchPolicy::Arrival arrival =
      policy.Arrive(scan, KindOf(scan), absl::Now(), queue, pool);
  EXPECT_FALSE(arrival.run_here);
  EXPECT_EQ(arrival.idle, nullptr);
}

}  // namespace
}  // namespace dmlserve
