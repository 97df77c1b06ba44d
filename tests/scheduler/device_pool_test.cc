// Placement and health on their own, on one thread: DevicePool is plain data
// behind the scheduler's mutex. The counts a worker keeps (inflight, waiting)
// are set by hand here to the states the scheduler's threads would bring
// about; a signal to a condition variable nobody waits on is harmless.

#include "scheduler/device_pool.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/scheduler/test_device.h"

namespace dmlserve {
namespace {

using ::dmlserve::testing::TestDevice;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr OperatorKind kSum = OperatorKind::kCumulativeSummation;
constexpr OperatorKind kMatMul = OperatorKind::kQuantizedLinearMatrixMultiply;

using Pool = ::dmlserve::testing::TestDevicePool;

class RecoveryObserver : public SchedulerObserver {
 public:
  void OnQueueDepth(int) override {}
  void OnJobStarted(OperatorKind, absl::Duration) override {}
  void OnBatchExecuted(OperatorKind, absl::string_view, int, absl::Duration) override {}
  void OnDeviceRemoved(absl::string_view, int) override {}
  void OnDeviceRecovered(absl::string_view device, int serving) override {
    events.push_back(absl::StrCat(device, " recovered, ", serving, " serve"));
  }
  void OnDeviceRecoveryFailed(absl::string_view device, const absl::Status& status) override {
    events.push_back(absl::StrCat(device, " did not recover: ", status.message()));
  }
  std::vector<std::string> events;
};

TEST(DevicePoolTest, TheLeastLoadedServingDeviceTakesTheNextBatch) {
  Pool p(2, 0, /*inflight=*/2);
  EXPECT_TRUE(p.pool->ShouldTake(p.slot(0)));
  EXPECT_TRUE(p.pool->ShouldTake(p.slot(1)));
  p.slot(0).inflight = 1;
  EXPECT_FALSE(p.pool->ShouldTake(p.slot(0)));
  EXPECT_TRUE(p.pool->ShouldTake(p.slot(1)));
  EXPECT_EQ(p.pool->IdleSlot(kSum), &p.slot(1));
  p.slot(1).inflight = 2;  // full: no longer compared
  EXPECT_TRUE(p.pool->ShouldTake(p.slot(0)));
  EXPECT_EQ(p.pool->IdleSlot(kSum), nullptr);
}

TEST(DevicePoolTest, FallbacksServeOnlyOnceEveryPrimaryFailed) {
  Pool p(1, 1);
  EXPECT_TRUE(p.pool->Serves(p.slot(0)));
  EXPECT_FALSE(p.pool->Serves(p.slot(1)));
  EXPECT_FALSE(p.pool->FallbacksServe(kSum));
  EXPECT_EQ(p.pool->IdleSlot(kSum), &p.slot(0));

  EXPECT_TRUE(p.pool->MarkFailed(p.slot(0), absl::InternalError("lost")));
  EXPECT_FALSE(p.pool->MarkFailed(p.slot(0), absl::InternalError("again")));
  EXPECT_EQ(p.pool->healthy(), 1);
  EXPECT_TRUE(p.pool->FallbacksServe(kSum));
  EXPECT_TRUE(p.pool->Serves(p.slot(1)));
  EXPECT_EQ(p.pool->IdleSlot(kSum), &p.slot(1));
  EXPECT_THAT(p.pool->last_failure(), HasSubstr("p0 failed"));
  EXPECT_THAT(p.pool->last_failure(), HasSubstr("lost"));

  p.pool->MarkRecovered(p.slot(0));
  EXPECT_EQ(p.pool->healthy(), 2);
  EXPECT_FALSE(p.pool->Serves(p.slot(1)));
}

TEST(DevicePoolTest, AnEmptyPoolSaysWhy) {
  Pool p(0);
  EXPECT_EQ(p.pool->healthy(), 0);
  EXPECT_EQ(p.pool->last_failure(), "no devices configured");
  EXPECT_EQ(p.pool->IdleSlot(kSum), nullptr);
}

TEST(DevicePoolTest, WakeOneWakesOneWorkerOfAnIdleDeviceFirst) {
  Pool p(2, 0, /*inflight=*/2);
  for (int i = 0; i < 2; ++i) p.slot(i).waiting = 2;
  p.slot(0).inflight = 1;
  p.pool->WakeOne(/*busy_may_take=*/false);
  EXPECT_EQ(p.slot(0).wakes_pending, 0);
  EXPECT_EQ(p.slot(1).wakes_pending, 1);
  p.pool->WakeOne(/*busy_may_take=*/false);
  EXPECT_EQ(p.slot(1).wakes_pending, 2);
  // Device 1's waiting workers are all signalled; a third wake finds no idle
  // device's worker and leaves device 0's alone unless a busy device may take.
  p.pool->WakeOne(/*busy_may_take=*/false);
  EXPECT_EQ(p.slot(0).wakes_pending, 0);
  p.pool->WakeOne(/*busy_may_take=*/true);
  EXPECT_EQ(p.slot(0).wakes_pending, 1);
}

TEST(DevicePoolTest, AWorkerWillLookByItsDeadlineOrWhenAwakeOrSignalled) {
  Pool p(1);
  DevicePool::Slot& slot = p.slot(0);
  const absl::Time now = absl::FromUnixSeconds(1000);
  EXPECT_TRUE(p.pool->WillLookBy(slot, now));  // awake: it looks before it waits
  slot.waiting = 1;
  slot.wait_deadlines = {now + absl::Milliseconds(1)};
  EXPECT_FALSE(p.pool->WillLookBy(slot, now));
  EXPECT_TRUE(p.pool->WillLookBy(slot, now + absl::Milliseconds(1)));
  slot.wait_deadlines = {absl::InfiniteFuture()};
  EXPECT_FALSE(p.pool->WillLookBy(slot, now + absl::Hours(1)));
  p.pool->WakeOne(/*busy_may_take=*/false);
  EXPECT_TRUE(p.pool->WillLookBy(slot, now));
}

TEST(DevicePoolTest, InAMixedPoolEachOperatorGoesToADeviceThatRunsIt) {
  Pool p(2, 0, 1, {{kSum, OperatorKind::kCumulativeProduct}, {kMatMul}});
  EXPECT_FALSE(p.pool->uniform());
  EXPECT_TRUE(p.pool->AnySupports(kMatMul));
  EXPECT_EQ(p.pool->IdleSlot(kMatMul), &p.slot(1));
  EXPECT_EQ(p.pool->IdleSlot(kSum), &p.slot(0));
  // Loads are not compared: the other device may not run the batch.
  p.slot(0).inflight = 0;
  p.slot(1).inflight = 0;
  EXPECT_TRUE(p.pool->ShouldTake(p.slot(0)));
  // Every waiting worker is woken: only they know what they can run.
  p.slot(0).waiting = 1;
  p.slot(1).waiting = 1;
  p.pool->WakeOne(/*busy_may_take=*/false);
  EXPECT_EQ(p.slot(0).wakes_pending, 1);
  EXPECT_EQ(p.slot(1).wakes_pending, 1);

  p.pool->MarkFailed(p.slot(1), absl::InternalError("lost"));
  EXPECT_FALSE(p.pool->CanServe(kMatMul));
  EXPECT_TRUE(p.pool->AnySupports(kMatMul));
  EXPECT_TRUE(p.pool->CanServe(kSum));
}

TEST(DevicePoolTest, AFallbackServesTheOperatorsNoHealthyPrimaryRuns) {
  // A GPU that runs only matrix multiplies, the CPU behind it running all.
  Pool p(1, 1, 1, {{kMatMul}});
  EXPECT_FALSE(p.pool->uniform());
  EXPECT_EQ(p.pool->ServedBy(p.slot(0)), OperatorSet().set(static_cast<size_t>(kMatMul)));
  EXPECT_EQ(p.pool->ServedBy(p.slot(1)),
            OperatorSet(p.slot(1).supports).reset(static_cast<size_t>(kMatMul)));
  EXPECT_EQ(p.pool->IdleSlot(kMatMul), &p.slot(0));
  EXPECT_EQ(p.pool->IdleSlot(kSum), &p.slot(1));
  EXPECT_TRUE(p.pool->FallbacksServe(kSum));
  EXPECT_FALSE(p.pool->FallbacksServe(kMatMul));

  p.pool->MarkFailed(p.slot(0), absl::InternalError("lost"));
  EXPECT_TRUE(p.pool->ServedBy(p.slot(1)).all());
  EXPECT_EQ(p.pool->IdleSlot(kMatMul), &p.slot(1));
  EXPECT_TRUE(p.pool->FallbacksServe(kMatMul));
  p.pool->MarkRecovered(p.slot(0));
  EXPECT_EQ(p.pool->IdleSlot(kMatMul), &p.slot(0));
}

TEST(DevicePoolTest, AUniformPoolServesEveryOperatorEverywhere) {
  Pool p(2);
  EXPECT_TRUE(p.pool->uniform());
  for (OperatorKind kind : {kSum, OperatorKind::kCumulativeProduct, kMatMul}) {
    EXPECT_TRUE(p.pool->AnySupports(kind));
    EXPECT_TRUE(p.pool->CanServe(kind));
  }
}

// AwaitRecovery waits on the slot's condition variable with a deadline: on
// one thread it simply times out after the interval and probes.
class RecoveryTest : public ::testing::Test {
 protected:
  RecoveryTest() : p_(1) { p_.pool->MarkFailed(p_.slot(0), absl::InternalError("lost")); }
  bool Await(absl::Duration interval) {
    absl::MutexLock lock(&mu_);
    return p_.pool->AwaitRecovery(p_.slot(0), &mu_, interval, &observer_);
  }

  Pool p_;
  absl::Mutex mu_;
  RecoveryObserver observer_;
};

TEST_F(RecoveryTest, AFailedProbeIsReportedAndTheDeviceStaysOut) {
  p_.devices[0]->RecoverWith(absl::InternalError("still broken"));
  EXPECT_TRUE(Await(absl::Milliseconds(1)));
  EXPECT_EQ(p_.devices[0]->recover_calls(), 1);
  EXPECT_FALSE(p_.slot(0).healthy);
  EXPECT_FALSE(p_.slot(0).probing);
  EXPECT_THAT(observer_.events, ElementsAre("p0 did not recover: still broken"));
}

TEST_F(RecoveryTest, ARecoveredDeviceServesAgainAndIsReported) {
  p_.devices[0]->RecoverWith(absl::OkStatus());
  EXPECT_TRUE(Await(absl::Milliseconds(1)));
  EXPECT_TRUE(p_.slot(0).healthy);
  EXPECT_EQ(p_.pool->healthy(), 1);
  EXPECT_THAT(observer_.events, ElementsAre("p0 recovered, 1 serve"));
}

TEST_F(RecoveryTest, ADeviceThatCannotRecoverIsNotProbedAgain) {
  p_.devices[0]->RecoverWith(absl::UnimplementedError("no"));
  EXPECT_FALSE(Await(absl::Milliseconds(1)));
  EXPECT_TRUE(observer_.events.empty());
}

TEST_F(RecoveryTest, NoProbeWhenProbingIsOffOrThePoolStops) {
  EXPECT_FALSE(Await(absl::ZeroDuration()));
  {
    absl::MutexLock lock(&mu_);
    p_.pool->Stop();
  }
  EXPECT_FALSE(Await(absl::Milliseconds(1)));
  EXPECT_EQ(p_.devices[0]->recover_calls(), 0);
}

}  // namespace
}  // namespace dmlserve
