#include "tests/scheduler/scheduler_fixture.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "kernels/backend/device.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"
#include "scheduler/scheduler.h"
#include "tests/reference/reference.h"
#include "tests/scheduler/test_device.h"
#include "tests/scheduler/test_jobs.h"

namespace dmlserve::testing {
namespace {

constexpr DataType kF32 = DataType::kFloat32;

}  // namespace

void SchedulerTest::Start(SchedulerOptions options, int device_count, int inflight,
                          std::vector<std::vector<OperatorKind>> serve_only) {
  std::vector<std::unique_ptr<Device>> devices;
  for (int i = 0; i < device_count; ++i) {
    auto device = std::make_unique<TestDevice>(absl::StrCat("test:", i), inflight);
    if (i < static_cast<int>(serve_only.size())) device->ServeOnly(serve_only[i]);
    devices_.push_back(device.get());
    devices.push_back(std::move(device));
  }
  scheduler_ = std::make_unique<Scheduler>(options, std::move(devices), &observer_);
}

std::shared_ptr<Submitted> SchedulerTest::Submit(Operation operation, absl::Time deadline) {
  std::shared_ptr<Submitted> submitted = NewJob(std::move(operation), deadline);
  absl::Status status = scheduler_->Submit(submitted->job);
  EXPECT_TRUE(status.ok()) << status;
  return submitted;
}

std::shared_ptr<Submitted> SchedulerTest::OccupyDevice(uint32_t elements) {
  devices_[0]->Hold();
  std::shared_ptr<Submitted> blocker = Submit(ScanOf(DataType::kInt32, {elements}, -1));
  devices_[0]->AwaitEntered(1);
  return blocker;
}

std::vector<std::shared_ptr<Submitted>> SchedulerTest::FailDevice0UnderTwoBatches() {
  devices_[0]->FailNext(1);
  devices_[1]->Hold();
  std::vector<std::shared_ptr<Submitted>> jobs = {Submit(ScanOf(kF32, {4}, 1)),
                                                  Submit(ScanOf(DataType::kInt32, {4}, 2))};
  EXPECT_TRUE(observer_.AwaitDeviceRemoved());
  devices_[1]->Release();
  for (auto& job : jobs) EXPECT_TRUE(job->Await());
  return jobs;
}

std::vector<std::vector<float>> SchedulerTest::Tags(
    const std::vector<std::vector<Operation>>& batches) {
  std::vector<std::vector<float>> tags;
  for (const auto& batch : batches) {
    tags.emplace_back();
    for (const Operation& operation : batch) tags.back().push_back(TagOf(operation));
  }
  return tags;
}

void SchedulerTest::ExpectCorrectScan(Submitted& submitted) {
  ASSERT_TRUE(submitted.result.status.ok()) << submitted.result.status;
  const Tensor expected = reference::ComputeScan(std::get<ScanOperation>(submitted.operation));
  const Tensor& output = submitted.result.output;
  EXPECT_EQ(output.data_type, expected.data_type);
  EXPECT_EQ(output.sizes, expected.sizes);
  ASSERT_EQ(output.byte_size(), expected.byte_size());
  EXPECT_EQ(std::memcmp(output.data(), expected.data(), expected.byte_size()), 0);
}

SchedulerOptions SchedulerTest::Options(int max_batch_size, absl::Duration delay) {
  SchedulerOptions options;
  options.batch.max_batch_size = max_batch_size;
  options.batch.max_queue_delay = delay;
  return options;
}

}  // namespace dmlserve::testing
