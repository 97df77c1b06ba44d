// The scheduler in front of the real CPU backend: batched, concurrent jobs
// still get exactly their own, correct results.

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/core/operation.h"
#include "kernels/cpu/cpu_device.h"
#include "scheduler/scheduler.h"
#include "tests/reference/conformance.h"
#include "tests/reference/reference.h"
#include "tests/scheduler/test_device.h"
#include "tests/scheduler/test_jobs.h"

namespace dmlserve {
namespace {

using ::dmlserve::testing::NewJob;
using ::dmlserve::testing::Submitted;

using Example = reference::ConformanceCase;

// Every conformance example. Matrix multiplies get their B registered under
// `registered_prefix` + name, so copies of one example share a batch.
std::vector<Example> LoadExamples(const std::string& registered_prefix) {
  absl::StatusOr<std::vector<Example>> examples = reference::LoadConformanceCases();
  EXPECT_TRUE(examples.ok()) << examples.status();
  if (!examples.ok()) return {};
  for (Example& example : *examples) {
    if (auto* matmul = std::get_if<QuantizedMatMulOperation>(&example.operation)) {
      matmul->b.set_registered_id(registered_prefix + example.name);
    }
  }
  return *std::move(examples);
}

void ExpectOutput(const Submitted& submitted, const Tensor& expected, const std::string& what) {
  ASSERT_TRUE(submitted.result.status.ok()) << what << ": " << submitted.result.status;
  const Tensor& output = submitted.result.output;
  EXPECT_EQ(output.data_type, expected.data_type) << what;
  ASSERT_EQ(output.byte_size(), expected.byte_size()) << what;
  EXPECT_EQ(std::memcmp(output.data(), expected.data(), expected.byte_size()), 0) << what;
}

TEST(CpuEndToEndTest, ConformanceExamplesSubmittedTogetherAllMatch) {
  const std::vector<Example> examples = LoadExamples("e2e-");
  ASSERT_EQ(examples.size(), 13u);
  // Several submitters at once: cheap jobs run on a submitting thread while a
  // device is idle, and the rest queue behind busy devices and fuse into
  // batches of up to kCopies; every answer must match whichever way it ran.
  constexpr int kCopies = 5;
  SchedulerOptions options;
  options.batch.max_batch_size = kCopies;
  options.batch.max_queue_delay = absl::Milliseconds(1);
  Scheduler scheduler(options, CreateCpuDevices(2), nullptr);
  std::vector<std::vector<std::pair<const Example*, std::shared_ptr<Submitted>>>> jobs(kCopies);
  std::vector<std::thread> submitters;
  for (int copy = 0; copy < kCopies; ++copy) {
    submitters.emplace_back([&, copy] {
      for (const Example& example : examples) {
        auto submitted = NewJob(example.operation);
        EXPECT_TRUE(scheduler.Submit(submitted->job).ok());
        jobs[copy].emplace_back(&example, std::move(submitted));
      }
    });
  }
  for (std::thread& submitter : submitters) submitter.join();
  for (auto& per_copy : jobs) {
    for (auto& [example, submitted] : per_copy) {
      ASSERT_TRUE(submitted->Await()) << example->name;
      ExpectOutput(*submitted, example->expected, example->name);
      EXPECT_GE(submitted->result.info.batch_size, 1u);
      EXPECT_LE(submitted->result.info.batch_size, static_cast<uint32_t>(kCopies));
      EXPECT_EQ(submitted->result.info.device.rfind("cpu:", 0), 0u);
    }
  }
}

TEST(CpuEndToEndTest, ManyIntegerScansRouteEachResultToItsJob) {
  SchedulerOptions options;
  options.batch.max_batch_size = 16;
  options.batch.max_queue_delay = absl::Milliseconds(2);
  Scheduler scheduler(options, CreateCpuDevices(2), nullptr);
  std::mt19937 random(7);
  std::vector<std::shared_ptr<Submitted>> jobs;
  for (int i = 0; i < 200; ++i) {
    auto size_up_to = [&random](uint32_t most) {
      return 1 + static_cast<uint32_t>(random() % most);
    };
    const Shape sizes = {size_up_to(5), size_up_to(40), size_up_to(7)};
    Tensor input = Tensor::Allocate(DataType::kInt32, sizes);
    for (uint64_t e = 0; e < input.element_count(); ++e) {
      input.mutable_data_as<int32_t>()[e] = static_cast<int32_t>(random() % 2001) - 1000;
    }
    absl::StatusOr<ScanOperation> scan = MakeScanOperation(
        OperatorKind::kCumulativeSummation, std::move(input), static_cast<uint32_t>(random() % 3),
        random() % 2 ? AxisDirection::kIncreasing : AxisDirection::kDecreasing, random() % 2);
    ASSERT_TRUE(scan.ok()) << scan.status();
    auto submitted = NewJob(*std::move(scan));
    ASSERT_TRUE(scheduler.Submit(submitted->job).ok());
    jobs.push_back(std::move(submitted));
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_TRUE(jobs[i]->Await());
    ExpectOutput(*jobs[i], reference::ComputeScan(std::get<ScanOperation>(jobs[i]->operation)),
                 absl::StrCat("job ", i));
  }
}

// A long product (a million rows, 16 chunks) whose caller gives up while it
// runs: the device polls the job between chunks and stops, and the job ends
// CANCELLED instead of computing the rest.
TEST(CpuEndToEndTest, AJobCancelledWhileItRunsStopsBetweenChunks) {
  Scheduler scheduler(SchedulerOptions(), CreateCpuDevices(1), nullptr);
  constexpr uint32_t kRows = 1 << 20;
  QuantizedMatMulTensors t;
  t.a = Tensor::Allocate(DataType::kUint8, {kRows, 1});
  std::memset(t.a.mutable_data(), 3, t.a.byte_size());
  t.a_scale = testing::Scale(1.0f);
  t.b = testing::MakeTensor<int8_t>(DataType::kInt8, {1, 1}, {5});
  t.b_scale = testing::Scale(1.0f);
  t.output_scale = testing::Scale(1.0f);
  absl::StatusOr<QuantizedMatMulOperation> op =
      MakeQuantizedMatMulOperation(std::move(t), DataType::kInt8);
  ASSERT_TRUE(op.ok()) << op.status();
  auto submitted = NewJob(*std::move(op));
  // The cancellation the unary RPC polls (gRPC's IsCancelled): true from the
  // fourth poll on, after the scheduler's own checks and a chunk or two.
  auto polls = std::make_shared<std::atomic<int>>(0);
  submitted->job->cancelled_elsewhere = [polls] { return polls->fetch_add(1) >= 3; };
  ASSERT_TRUE(scheduler.Submit(submitted->job).ok());
  ASSERT_TRUE(submitted->Await());
  EXPECT_EQ(submitted->result.status.code(), absl::StatusCode::kCancelled)
      << submitted->result.status;
  EXPECT_LT(polls->load(), 8);  // polled once per chunk: it did not run all 16
}

}  // namespace
}  // namespace dmlserve
