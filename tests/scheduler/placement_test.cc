// Placement by estimated completion (DevicePool with Placement::kCost, and
// the CostModel each device learns), on a fake clock with simulated devices
// of known costs: the decisions the scheduler's workers make (Prefers, Best,
// Claim, Release, Observe), replayed event by event without threads, so that
// each outcome can be compared with what is best, computed here.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "scheduler/batch_queue.h"
#include "scheduler/clock.h"
#include "scheduler/compatibility_key.h"
#include "scheduler/cost_model.h"
#include "scheduler/device_pool.h"
#include "scheduler/dispatch_policy.h"
#include "tests/scheduler/test_device.h"
#include "tests/scheduler/test_jobs.h"

namespace dmlserve {
namespace {

namespace t = ::dmlserve::testing;

constexpr OperatorKind kMatMul = OperatorKind::kQuantizedLinearMatrixMultiply;
constexpr double kUs = 1e-6;

// What a simulated device really costs.
struct TrueCost {
  double fixed_seconds;
  double seconds_per_unit;
  double Of(double units) const { return fixed_seconds + seconds_per_unit * units; }
};

// A CPU-like device (no fixed cost to speak of, slow per unit) and a
// GPU-like one (a large fixed cost per batch: submission and completion;
// twenty times the rate).
constexpr TrueCost kCpu{5 * kUs, 1e-9};
constexpr TrueCost kGpu{150 * kUs, 0.05e-9};

class PlacementTest : public ::testing::Test {
 protected:
  // Devices "cpu" (index 0) and "gpu" (1), one batch at a time each, their
  // estimates seeded with the truth (a perfect calibration).
  PlacementTest() : truth_{kCpu, kGpu} {
    std::vector<std::unique_ptr<Device>> devices;
    for (const char* name : {"cpu", "gpu"})
      devices.push_back(std::make_unique<t::TestDevice>(name));
    pool_ = std::make_unique<DevicePool>(std::move(devices), std::vector<std::unique_ptr<Device>>{},
                                         Placement::kCost);
    for (size_t i = 0; i < truth_.size(); ++i) {
      pool_->at(i).cost.Seed(kMatMul, truth_[i].fixed_seconds, truth_[i].seconds_per_unit);
    }
  }

  DevicePool::Slot& slot(size_t i) { return pool_->at(i); }
  int IndexOf(const DevicePool::Slot* s) {
    for (size_t i = 0; i < pool_->size(); ++i) {
      if (&pool_->at(i) == s) return static_cast<int>(i);
    }
    return -1;
  }

  // Runs `batches` (units of work each, all waiting at the start, in this
  // order) as the scheduler's workers would: whenever a device is free, it
  // takes the oldest batch it Prefers; a batch ends after its true cost, and
  // the device learns from it. Returns when the last batch ends, and which
  // device ran each batch.
  struct Run {
    absl::Duration makespan;
    std::vector<int> device_of;  // per batch
  };
  Run Simulate(const std::vector<double>& batches) {
    const absl::Time start = clock_.Now();
    std::vector<bool> taken(batches.size(), false);
    std::vector<int> device_of(batches.size(), -1);
    // Per device: the batch it runs (-1: none) and when that ends.
    std::vector<int> running(pool_->size(), -1);
    std::vector<absl::Time> ends(pool_->size(), absl::InfiniteFuture());
    size_t done = 0;
    while (done < batches.size()) {
      const absl::Time now = clock_.Now();
      for (size_t d = 0; d < pool_->size(); ++d) {
        if (running[d] >= 0 || !pool_->ShouldTake(slot(d))) continue;
        for (size_t b = 0; b < batches.size(); ++b) {
          if (taken[b] || !pool_->Prefers(slot(d), kMatMul, batches[b], now)) continue;
          taken[b] = true;
          device_of[b] = static_cast<int>(d);
          running[d] = static_cast<int>(b);
          pool_->Claim(slot(d), kMatMul, batches[b], now);
          ends[d] = now + absl::Seconds(truth_[d].Of(batches[b]));
          break;
        }
      }
      // The next end.
      size_t next = 0;
      for (size_t d = 1; d < ends.size(); ++d) {
        if (ends[d] < ends[next]) next = d;
      }
      EXPECT_NE(ends[next], absl::InfiniteFuture()) << "nobody takes the waiting batches";
      if (ends[next] == absl::InfiniteFuture()) break;
      clock_.Set(ends[next]);
      const double units = batches[running[next]];
      const DevicePool::Measured ran{units, absl::Seconds(truth_[next].Of(units)), ends[next]};
      pool_->Release(slot(next), kMatMul, &ran);
      running[next] = -1;
      ends[next] = absl::InfiniteFuture();
      ++done;
    }
    return {clock_.Now() - start, device_of};
  }

  std::vector<TrueCost> truth_;
  FakeClock clock_;
  std::unique_ptr<DevicePool> pool_;
};

TEST_F(PlacementTest, SmallBatchesGoToTheLowFixedCostDeviceLargeOnesToTheHighRateOne) {
  // Equal estimates where 5 µs + 1 ns·u = 150 µs + 0.05 ns·u: u = 152,631.6.
  const absl::Time now = clock_.Now();
  EXPECT_EQ(pool_->Best(kMatMul, 1, now), &slot(0));  // a GEMV row of a small B
  EXPECT_EQ(pool_->Best(kMatMul, 152'000, now), &slot(0));
  EXPECT_EQ(pool_->Best(kMatMul, 153'000, now), &slot(1));
  EXPECT_EQ(pool_->Best(kMatMul, 256.0 * 4096 * 4096, now), &slot(1));  // a 256-row product
  // A busy device is judged by when it frees: the GPU running a batch due to
  // end in 1 ms (150 µs + 0.05 ns x 17 M) loses a large batch that the idle
  // CPU finishes in 0.9 ms.
  pool_->Claim(slot(1), kMatMul, 17e6, now);
  EXPECT_EQ(pool_->Best(kMatMul, 800'000, now), &slot(0));
  EXPECT_NEAR(absl::ToDoubleMicroseconds(pool_->FreeAt(slot(1), now) - now), 1000, 0.01);
  // ...and an idle device is never "free" before now.
  EXPECT_EQ(pool_->FreeAt(slot(0), now), now);
  pool_->Release(slot(1), kMatMul);
}

TEST_F(PlacementTest, AnArrivalRunsAtOnceOnlyWhereItFinishesFirst) {
  const absl::Time now = clock_.Now();
  const Operation tiny = t::MatMulOf(t::WeightB(1), t::Scale(1.0f));  // 2x3 by 3x2
  EXPECT_EQ(pool_->IdleSlot(kMatMul, &tiny, now), &slot(0));
  // The CPU busy for 10 µs (5 µs + 1 ns x 5000): the tiny job still
  // finishes first there, so it waits for the CPU rather than run on the
  // idle GPU.
  pool_->Claim(slot(0), kMatMul, 5000, now);
  EXPECT_EQ(pool_->IdleSlot(kMatMul, &tiny, now), nullptr);
  EXPECT_EQ(pool_->Best(kMatMul, 12, now), &slot(0));
  pool_->Release(slot(0), kMatMul);
}

// What the scheduler's wakes see: a worker of each device asleep until
// woken, a queue, and DispatchPolicy::WakeForQueue.
class WakePlacementTest : public PlacementTest {
 protected:
  WakePlacementTest() {
    for (size_t i = 0; i < pool_->size(); ++i) {
      slot(i).waiting = 1;
      slot(i).wait_deadlines = {absl::InfiniteFuture()};
    }
  }
  void Enqueue(Operation operation) {
    std::shared_ptr<Job> job = t::NewJob(std::move(operation))->job;
    job->enqueue_time = clock_.Now();
    CompatibilityKey key = CompatibilityKey::For(job->operation);
    queue_.Add(job, std::move(key), OperationBytes(job->operation));
  }
  // Which devices WakeForQueue signals now (and forgets the signals).
  std::vector<int> Woken() {
    policy_.WakeForQueue(clock_.Now(), queue_, *pool_);
    std::vector<int> woken;
    for (size_t i = 0; i < pool_->size(); ++i) {
      if (slot(i).wakes_pending > 0) woken.push_back(static_cast<int>(i));
      slot(i).wakes_pending = 0;
    }
    return woken;
  }
  // A product past the 152,632 units where the two estimates meet (40,000
  // rows by the test's 3x2 B), which finishes first on the GPU.
  static Operation Large(int8_t tag) {
    return t::MatMulOf(t::WeightB(tag), t::Scale(1.0f), Tensor(), /*m=*/40'000);
  }
  static Operation Tiny(int8_t tag) { return t::MatMulOf(t::WeightB(tag), t::Scale(1.0f)); }

  BatchQueue queue_{{64, 1ull << 30, absl::Microseconds(200)}};
  DispatchPolicy policy_{{absl::Milliseconds(1), true}};
};

TEST_F(WakePlacementTest, WhatWaitsWakesOnlyTheDeviceWhereItFinishesFirst) {
  EXPECT_EQ(Woken(), std::vector<int>({0, 1}));  // nothing may start: WakeOne's own rule
  // A tiny product wakes the CPU's worker, not the GPU's: the GPU's would
  // only decline it.
  Enqueue(Tiny(1));
  EXPECT_EQ(Woken(), std::vector<int>({0}));
  // A large one alone wakes the GPU's.
  ASSERT_NE(queue_.Take(clock_.Now(), true, *slot(0).device, [](const Batch&) { return true; }),
            nullptr);
  Enqueue(Large(2));
  ASSERT_GT(BatchWorkUnits(*queue_.UpcomingBatches(clock_.Now()).front()), 153'000);
  EXPECT_EQ(Woken(), std::vector<int>({1}));
}

TEST_F(WakePlacementTest, ABusyBestDeviceForTheFirstBatchDoesNotHideAnIdleOneForTheNext) {
  // The CPU runs a batch (no free worker) and is still where the tiny batch
  // finishes first; the large batch behind it finishes first on the idle
  // GPU, whose worker wakes for it.
  pool_->Claim(slot(0), kMatMul, 15'000, clock_.Now());  // 20 µs
  Enqueue(Tiny(1));
  Enqueue(Large(2));
  EXPECT_EQ(Woken(), std::vector<int>({1}));
  pool_->Release(slot(0), kMatMul);
}

TEST_F(PlacementTest, AMixedLoadIsSplitWithinTenPercentOfTheBestSplit) {
  // 600 tiny batches (a row against a small B: 6 µs on the CPU, 150 on the
  // GPU) and 12 large ones (4 ms on the CPU, 350 µs on the GPU),
  // interleaved as they might arrive.
  const double small = 1'000;
  const double large = 4'000'000;
  std::vector<double> batches;
  for (int i = 0; i < 612; ++i) batches.push_back(i % 51 == 50 ? large : small);
  const Run run = Simulate(batches);

  // The best split, by enumeration: how many of each the GPU runs.
  double best = std::numeric_limits<double>::infinity();
  for (int l = 0; l <= 12; ++l) {
    for (int s = 0; s <= 600; ++s) {
      const double gpu = l * kGpu.Of(large) + s * kGpu.Of(small);
      const double cpu = (12 - l) * kCpu.Of(large) + (600 - s) * kCpu.Of(small);
      best = std::min(best, std::max(gpu, cpu));
    }
  }
  const double makespan = absl::ToDoubleSeconds(run.makespan);
  EXPECT_LE(makespan, 1.10 * best) << "makespan " << makespan << " s, best " << best << " s";
  // Both devices together beat the better one alone by far more than 1.2x.
  const double cpu_alone = 12 * kCpu.Of(large) + 600 * kCpu.Of(small);
  const double gpu_alone = 12 * kGpu.Of(large) + 600 * kGpu.Of(small);
  EXPECT_LE(1.2 * makespan, std::min(cpu_alone, gpu_alone));
  // Each ran what it is good at.
  int tiny_on_cpu = 0, large_on_gpu = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    tiny_on_cpu += batches[i] == small && run.device_of[i] == 0;
    large_on_gpu += batches[i] == large && run.device_of[i] == 1;
  }
  EXPECT_GE(tiny_on_cpu, 540);
  EXPECT_GE(large_on_gpu, 10);
}

TEST_F(PlacementTest, ADeviceThatSlowsDownMidRunLosesWorkToTheOthers) {
  // Batches the GPU runs 3.4x faster than the CPU (180 µs against 605 µs)
  // while it runs at its calibrated speed: it takes most of them.
  const double units = 600'000;
  const std::vector<double> batches(40, units);
  const auto gpu_share = [](const Run& run) {
    return std::count(run.device_of.begin(), run.device_of.end(), 1) /
           static_cast<double>(run.device_of.size());
  };
  EXPECT_GT(gpu_share(Simulate(batches)), 0.7);
  // Now it runs ten times slower (another tenant, a thermal limit): it
  // learns so within a few batches, and the CPU takes most of the work.
  truth_[1] = {kGpu.fixed_seconds * 10, kGpu.seconds_per_unit * 10};
  EXPECT_LT(gpu_share(Simulate(batches)), 0.35);
  // It learned enough to lose: its estimate is above the CPU's (and it is
  // not measured further until it fades, see below).
  const double estimate =
      absl::ToDoubleSeconds(slot(1).cost.Estimate(kMatMul, units, clock_.Now()));
  EXPECT_GT(estimate, kCpu.Of(units));
}

TEST_F(PlacementTest, ALostDevicesWorkMovesAndARecoveredOneGetsWorkAgain) {
  const double large = 256.0 * 4096 * 4096;
  ASSERT_TRUE(pool_->MarkFailed(slot(1), absl::InternalError("device removed")));
  EXPECT_EQ(pool_->Best(kMatMul, large, clock_.Now()), &slot(0));
  EXPECT_FALSE(pool_->ShouldTake(slot(1)));
  EXPECT_EQ(Simulate({large, large}).device_of, (std::vector<int>{0, 0}));
  pool_->MarkRecovered(slot(1));
  EXPECT_EQ(Simulate({large, large}).device_of, (std::vector<int>{1, 1}));
}

TEST_F(PlacementTest, ADeviceThatSlowedDownAndRecoveredGetsWorkAgain) {
  const double units = 600'000;
  // A slow spell: the GPU learns it is ten times slower and loses the work.
  truth_[1] = {kGpu.fixed_seconds * 10, kGpu.seconds_per_unit * 10};
  Simulate(std::vector<double>(40, units));
  const auto next = [&] { return Simulate({units}).device_of[0]; };
  EXPECT_EQ(next(), 0);
  // It is fast again, but nothing measures it while it gets no work: its
  // estimate fades toward its calibration (half the difference every
  // kFadeHalfLife), and once that beats the CPU it gets the next batch, which
  // teaches it the rest.
  truth_[1] = kGpu;
  clock_.Advance(CostModel::kFadeHalfLife);
  EXPECT_EQ(next(), 0);  // 1.8 ms faded to about 1 ms: still above 605 µs
  clock_.Advance(2 * CostModel::kFadeHalfLife);
  EXPECT_EQ(next(), 1);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(next(), 1) << i;
  const double estimate =
      absl::ToDoubleSeconds(slot(1).cost.Estimate(kMatMul, units, clock_.Now()));
  EXPECT_NEAR(estimate, kGpu.Of(units), 0.1 * kGpu.Of(units));
}

// Devices with several workers each, seeded as the fixture's, where the
// GPU's calibration may be far off (lavapipe's, measured on an idle machine,
// was 100x short under load).
class TrialTest : public ::testing::Test {
 protected:
  TrialTest() {
    std::vector<std::unique_ptr<Device>> devices;
    devices.push_back(std::make_unique<t::TestDevice>("cpu", /*max_inflight_batches=*/2));
    devices.push_back(std::make_unique<t::TestDevice>("gpu", /*max_inflight_batches=*/4));
    pool_ = std::make_unique<DevicePool>(std::move(devices), std::vector<std::unique_ptr<Device>>{},
                                         Placement::kCost);
    cpu().cost.Seed(kMatMul, kCpu.fixed_seconds, kCpu.seconds_per_unit);
    gpu().cost.Seed(kMatMul, kGpu.fixed_seconds, kGpu.seconds_per_unit);
  }
  DevicePool::Slot& cpu() { return pool_->at(0); }
  DevicePool::Slot& gpu() { return pool_->at(1); }
  // A batch of `units` that ran on `slot` from now and took `took`.
  void Ran(DevicePool::Slot& slot, double units, absl::Duration took) {
    pool_->Claim(slot, kMatMul, units, clock_.Now());
    clock_.Advance(took);
    Ends(slot, units, took);
  }
  // A batch of `units` claimed on `slot` ends now, having taken `took`.
  void Ends(DevicePool::Slot& slot, double units, absl::Duration took) {
    const DevicePool::Measured ran{units, took, clock_.Now()};
    pool_->Release(slot, kMatMul, &ran);
  }
  // Occupies both CPU workers with batches estimated to take 1 ms.
  void BusyCpu() {
    for (int i = 0; i < 2; ++i) pool_->Claim(cpu(), kMatMul, 995'000, clock_.Now());
  }
  bool Prefers(DevicePool::Slot& slot, double units, DevicePool::Slot** best = nullptr) {
    return pool_->Prefers(slot, kMatMul, units, clock_.Now(), best);
  }

  static constexpr double kTiny = 1'000;  // 6 µs on the CPU, 150 µs on the GPU
  // A 256 x 4096 x 4096 product: 4.3 s on the CPU, 215 ms on the GPU.
  static constexpr double kLarge = 256.0 * 4096 * 4096;
  FakeClock clock_;
  std::unique_ptr<DevicePool> pool_;
};

TEST_F(TrialTest, AnUnconfirmedEstimateIsTriedOneBatchAtATime) {
  Ran(cpu(), kTiny, absl::Microseconds(6));  // the CPU's estimate is confirmed
  BusyCpu();
  ASSERT_FALSE(gpu().cost.Confirmed(kMatMul, clock_.Now()));
  // The GPU's calibrated 150 µs beats waiting 1 ms for the CPU: it takes
  // the batch, as a trial.
  EXPECT_TRUE(Prefers(gpu(), kTiny));
  pool_->Claim(gpu(), kMatMul, kTiny, clock_.Now());
  EXPECT_TRUE(pool_->OnTrial(gpu(), kMatMul));
  // The next one would still finish first there behind the trial (300 µs),
  // but none of the three free GPU workers starts it beside the trial, and
  // nobody is woken for it.
  DevicePool::Slot* best = &cpu();
  EXPECT_EQ(pool_->Best(kMatMul, kTiny, clock_.Now()), &gpu());
  EXPECT_FALSE(Prefers(gpu(), kTiny, &best));
  EXPECT_EQ(best, nullptr);
  EXPECT_FALSE(Prefers(cpu(), kTiny));
  // The CPU frees before the trial ends (it took 100x its estimate): the
  // CPU takes what waits.
  clock_.Advance(absl::Milliseconds(1));
  for (int i = 0; i < 2; ++i) Ends(cpu(), 995'000, absl::Milliseconds(1));
  EXPECT_TRUE(Prefers(cpu(), kTiny));
  clock_.Advance(absl::Milliseconds(14));
  Ends(gpu(), kTiny, absl::Milliseconds(15));
  // The trial taught the GPU what it costs: it loses tiny batches.
  EXPECT_FALSE(pool_->OnTrial(gpu(), kMatMul));
  EXPECT_TRUE(gpu().cost.Confirmed(kMatMul, clock_.Now()));
  EXPECT_GT(gpu().cost.Estimate(kMatMul, kTiny, clock_.Now()), absl::Milliseconds(3));
  EXPECT_EQ(pool_->Best(kMatMul, kTiny, clock_.Now()), &cpu());
}

TEST_F(TrialTest, ALargeBatchWaitsBehindATrialRatherThanRunTwentyTimesSlower) {
  Ran(cpu(), kTiny, absl::Microseconds(6));  // the CPU's estimate is confirmed
  // Two large products after a quiet spell: the first is the GPU's trial;
  // the second waits for it (430 ms) rather than take 4.3 s on the CPU.
  ASSERT_TRUE(Prefers(gpu(), kLarge));
  pool_->Claim(gpu(), kMatMul, kLarge, clock_.Now());
  EXPECT_EQ(pool_->Best(kMatMul, kLarge, clock_.Now()), &gpu());
  EXPECT_FALSE(Prefers(cpu(), kLarge));
  EXPECT_FALSE(Prefers(gpu(), kLarge));
  // The trial took what was estimated: the GPU takes the next ones on every
  // worker.
  const absl::Duration took = absl::Seconds(kGpu.Of(kLarge));
  clock_.Advance(took);
  Ends(gpu(), kLarge, took);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(Prefers(gpu(), kLarge)) << i;
    pool_->Claim(gpu(), kMatMul, kLarge, clock_.Now());
  }
  EXPECT_FALSE(pool_->OnTrial(gpu(), kMatMul));
  // An estimate is confirmed for kConfirmedFor after its last batch, as
  // the pool reports it (dmlserve_device_cost_confirmed).
  const size_t matmul = static_cast<size_t>(kMatMul);
  EXPECT_TRUE(pool_->Statuses(clock_.Now())[1].confirmed[matmul]);
  EXPECT_FALSE(pool_->Statuses(clock_.Now() + CostModel::kConfirmedFor)[1].confirmed[matmul]);
  EXPECT_FALSE(pool_->Statuses(clock_.Now())[1].confirmed[0]);  // no scan measured
}

TEST_F(TrialTest, WithNothingConfirmedATrialOnTheCpuKeepsTinyBatchesThere) {
  // At start-up (or after a quiet spell) nothing is confirmed: a trial on
  // the CPU does not push the next tiny batch to the GPU; it follows the
  // trial, 6 µs later.
  ASSERT_TRUE(Prefers(cpu(), kTiny));
  pool_->Claim(cpu(), kMatMul, kTiny, clock_.Now());
  EXPECT_TRUE(pool_->OnTrial(cpu(), kMatMul));
  EXPECT_EQ(pool_->Best(kMatMul, kTiny, clock_.Now()), &cpu());
  EXPECT_FALSE(Prefers(gpu(), kTiny));
  clock_.Advance(absl::Microseconds(6));
  Ends(cpu(), kTiny, absl::Microseconds(6));
  EXPECT_TRUE(Prefers(cpu(), kTiny));
}

TEST_F(TrialTest, NobodyIsWokenForWhatWaitsBehindATrial) {
  for (size_t i = 0; i < pool_->size(); ++i) {
    pool_->at(i).waiting = 1;
    pool_->at(i).wait_deadlines = {absl::InfiniteFuture()};
  }
  Ran(cpu(), kTiny, absl::Microseconds(6));
  BusyCpu();
  pool_->Claim(gpu(), kMatMul, kTiny, clock_.Now());  // the GPU's trial
  BatchQueue queue({64, 1ull << 30, absl::Microseconds(200)});
  DispatchPolicy policy({absl::Milliseconds(1), true});
  // A tiny product arrives; it finishes first on the GPU, behind the trial.
  std::shared_ptr<Job> job = t::NewJob(t::MatMulOf(t::WeightB(1), t::Scale(1.0f)))->job;
  job->enqueue_time = clock_.Now();
  const DispatchPolicy::Arrival arrival =
      policy.Arrive(job->operation, kMatMul, clock_.Now(), queue, *pool_);
  EXPECT_EQ(arrival.preferred, &gpu());
  EXPECT_TRUE(arrival.preferred_on_trial);
  EXPECT_EQ(arrival.idle, nullptr);
  CompatibilityKey key = CompatibilityKey::For(job->operation);
  queue.Add(job, std::move(key), OperationBytes(job->operation));
  EXPECT_EQ(policy.Queued(arrival, /*was_empty=*/true, false, clock_.Now(), queue, *pool_),
            DispatchPolicy::AfterQueue::kNothing);
  policy.WakeForQueue(clock_.Now(), queue, *pool_);
  EXPECT_EQ(gpu().wakes_pending, 0);
  EXPECT_EQ(cpu().wakes_pending, 0);
  // Once the trial ends (as estimated), what waits wakes the GPU.
  clock_.Advance(absl::Microseconds(150));
  Ends(gpu(), kTiny, absl::Microseconds(150));
  policy.WakeForQueue(clock_.Now(), queue, *pool_);
  EXPECT_EQ(gpu().wakes_pending, 1);
  queue.RemoveAll();
}

TEST(CostModelTest, LearnsAnUnseededDeviceAndSharesErrorsByPart) {
  CostModel model;
  const absl::Time at = absl::UnixEpoch();
  EXPECT_EQ(model.Estimate(kMatMul, 1e6, at), absl::ZeroDuration());  // untried: tried first
  model.Observe(kMatMul, 1e6, absl::Microseconds(300), at);
  EXPECT_EQ(model.Estimate(kMatMul, 1e6, at), absl::Microseconds(300));
  EXPECT_EQ(model.line(kMatMul).observations, 1u);
  // Seeded 100 µs + 1 ns/unit; every batch of 1e5 units (estimate 200 µs)
  // takes 400 µs: both parts double, so a batch of another size is also
  // estimated twice as slow.
  model.Seed(kMatMul, 100 * kUs, 1e-9);
  for (int i = 0; i < 60; ++i) model.Observe(kMatMul, 1e5, absl::Microseconds(400), at);
  EXPECT_NEAR(model.line(kMatMul).fixed_seconds, 200 * kUs, 1 * kUs);
  EXPECT_NEAR(model.line(kMatMul).seconds_per_unit, 2e-9, 0.01e-9);
  EXPECT_EQ(model.line(OperatorKind::kCumulativeSummation).observations, 0u);
}

TEST(CostModelTest, WorkUnitsCountMacsAndBOnce) {
  const Operation matmul = t::MatMulOf(t::WeightB(1), t::Scale(1.0f), Tensor(), /*m=*/4);
  EXPECT_EQ(JobWorkUnits(matmul), 4.0 * 3 * 2);  // M x K x N
  EXPECT_EQ(SharedWorkUnits(matmul), 6.0);       // B's bytes (3x2 INT8)
  const Operation scan = t::ScanOf(DataType::kFloat32, {2, 5}, 1);
  EXPECT_EQ(JobWorkUnits(scan), 10.0);
  EXPECT_EQ(SharedWorkUnits(scan), 0.0);
}

}  // namespace
}  // namespace dmlserve
