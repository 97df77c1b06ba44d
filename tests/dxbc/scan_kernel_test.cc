// The scan kernels, run for real (D3D12 runtime on vkd3d + lavapipe) and
// compared with the reference under the spec's rules, for every data type,
// every strategy of the planner (serial, one group per line, single-pass
// look-back, and look-back forced to reduce every predecessor itself) and
// batches of several jobs.

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "kernels/core/operation.h"
#include "kernels/d3d12/shaders/batch_planner.h"
#include "tests/dxbc/kernel_test_runtime.h"
#include "tests/reference/conformance.h"
#include "tests/reference/random_operations.h"
#include "tests/reference/reference.h"

namespace dmlserve::d3d12 {
namespace {

using ::dmlserve::d3d12::testing::KernelTestRuntime;

struct Strategy {
  const char* name;
  PlannerOptions options;
};

// Options that force each strategy whatever the axis length; the tile shape
// is the small one so that short test axes span many tiles.
std::vector<Strategy> Strategies() {
  std::vector<Strategy> s(5);
  s[0].name = "default";
  s[1].name = "serial";
  s[1].options.scan.serial_max_axis = std::numeric_limits<uint32_t>::max();
  s[2].name = "line";
  s[2].options.scan.serial_max_axis = 0;
  s[2].options.scan.line_max_tiles = std::numeric_limits<uint32_t>::max();
  s[2].options.scan.tile_shape = 0;
  s[2].options.scan.strided_min_inner = std::numeric_limits<uint32_t>::max();
  s[3].name = "lookback";
  s[3].options.scan.serial_max_axis = 0;
  s[3].options.scan.line_max_tiles = 0;
  s[3].options.scan.line_min_lines = std::numeric_limits<uint64_t>::max();
  s[3].options.scan.tile_shape = 0;
  s[3].options.scan.strided_min_inner = std::numeric_limits<uint32_t>::max();
  // No polls: every group reduces its predecessors' tiles itself until it
  // reaches the line's first tile's inclusive prefix or the first tile
  // (the path that guarantees progress, whatever the group order).
  s[4] = s[3];
  s[4].name = "lookback-without-polls";
  s[4].options.scan.lookback_polls = 0;
  return s;
}

struct ScanKind {
  OperatorKind kind;
  DataType type;
};

std::vector<ScanKind> AllScanKinds() {
  std::vector<ScanKind> kinds;
  for (OperatorKind kind : {OperatorKind::kCumulativeSummation, OperatorKind::kCumulativeProduct}) {
    for (DataType type : SupportedDataTypes(kind)) kinds.push_back({kind, type});
  }
  return kinds;
}

KernelTestRuntime* Runtime() {
  absl::StatusOr<KernelTestRuntime*> runtime = KernelTestRuntime::Get();
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  return runtime.ok() ? *runtime : nullptr;
}

// Runs the operations as one batch and checks every output.
void RunAndCheck(const std::vector<Operation>& operations, const Strategy& strategy) {
  KernelTestRuntime* runtime = Runtime();
  ASSERT_NE(runtime, nullptr);
  std::vector<WorkItem> items(operations.size());
  for (size_t i = 0; i < operations.size(); ++i) items[i].operation = &operations[i];
  const absl::Status run = runtime->Run(absl::MakeSpan(items), strategy.options);
  ASSERT_TRUE(run.ok()) << strategy.name << ": " << run;
  for (size_t i = 0; i < operations.size(); ++i) {
    ASSERT_TRUE(items[i].status.ok()) << items[i].status;
    absl::Status check = reference::CheckOutput(operations[i], items[i].output);
    EXPECT_TRUE(check.ok()) << strategy.name << ": " << reference::Describe(operations[i]) << ": "
                            << check;
  }
}

// The plan of `operation` as a batch of its own, with the default options,
// for its dispatches and buffers only (its finisher refers to a work item
// that is gone by then).
absl::StatusOr<DispatchPlan> PlanAlone(const Operation& operation) {
  WorkItem item;
  item.operation = &operation;
  return PlanBatch(absl::MakeSpan(&item, 1));
}

TEST(ScanKernelTest, ConformanceExamplesAreExact) {
  absl::StatusOr<std::vector<reference::ConformanceCase>> cases = reference::LoadConformanceCases();
  ASSERT_TRUE(cases.ok()) << cases.status();
  KernelTestRuntime* runtime = Runtime();
  ASSERT_NE(runtime, nullptr);
  int scans = 0;
  for (const Strategy& strategy : Strategies()) {
    for (const reference::ConformanceCase& c : *cases) {
      if (!std::holds_alternative<ScanOperation>(c.operation)) continue;
      ++scans;
      WorkItem item;
      item.operation = &c.operation;
      const absl::Status run = runtime->Run(absl::MakeSpan(&item, 1), strategy.options);
      ASSERT_TRUE(run.ok()) << strategy.name << ": " << run;
      ASSERT_TRUE(item.status.ok()) << item.status;
      absl::Status exact = reference::CheckExact(c.expected, item.output);
      EXPECT_TRUE(exact.ok()) << strategy.name << " " << c.file << "/" << c.name << ": " << exact;
    }
  }
  EXPECT_GT(scans, 0);
}

TEST(ScanKernelTest, RandomScansOfEveryTypeAndStrategy) {
  reference::RandomOperationGenerator generator(20240611);
  generator.set_max_elements(3000);
  std::vector<Operation> operations;
  for (const ScanKind& k : AllScanKinds()) {
    for (int i = 0; i < 6; ++i) operations.push_back(generator.NextScan(k.kind, k.type));
  }
  for (const Strategy& strategy : Strategies()) RunAndCheck(operations, strategy);
}

// Lines long enough for many tiles of the production tile shape, in both
// directions, inclusive and exclusive: the default plan is the single-pass
// look-back.
TEST(ScanKernelTest, LongLinesUseLookBack) {
  reference::RandomOperationGenerator generator(7);
  std::vector<Operation> operations;
  const Shape shapes[] = {{3, 20011}, {70001}, {2, 9000, 2}};
  for (const ScanKind& k : AllScanKinds()) {
    for (const Shape& shape : shapes) {
      const uint32_t axis = shape.size() == 3 ? 1 : static_cast<uint32_t>(shape.size() - 1);
      for (int variant = 0; variant < 2; ++variant) {
        Tensor input = generator.RandomTensor(k.kind, k.type, shape);
        absl::StatusOr<ScanOperation> op = MakeScanOperation(
            k.kind, std::move(input), axis,
            variant ? AxisDirection::kDecreasing : AxisDirection::kIncreasing, variant == 1);
        ASSERT_TRUE(op.ok()) << op.status();
        operations.push_back(*std::move(op));
      }
    }
  }
  absl::StatusOr<DispatchPlan> plan = PlanAlone(operations[0]);
  ASSERT_TRUE(plan.ok());
  ASSERT_FALSE(plan->dispatches.empty());
  ASSERT_GE(plan->dispatches.size(), 2u);
  EXPECT_EQ(plan->dispatches[0].kernel, "scan.clear");
  EXPECT_TRUE(plan->dispatches[0].barrier_after);
  EXPECT_TRUE(absl::StartsWith(plan->dispatches[1].kernel, "scan.lookback/"))
      << plan->dispatches[1].kernel;
  RunAndCheck(operations, Strategies()[0]);
}

// The look-back state comes from the buffer pool, where earlier batches
// leave anything: here outputs made entirely of 1s and 2s (the words that
// mean "aggregate" and "inclusive prefix" in a state slot) in buffers of
// every size the state takes. The state is cleared for every run.
TEST(ScanKernelTest, LookBackStateIsClearedForEveryRun) {
  reference::RandomOperationGenerator generator(8);
  std::vector<Operation> scans, flag_like;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<ScanOperation> op = MakeScanOperation(
        OperatorKind::kCumulativeSummation,
        generator.RandomTensor(OperatorKind::kCumulativeSummation, DataType::kInt32, {40000}), 0,
        AxisDirection::kIncreasing, false);
    ASSERT_TRUE(op.ok());
    scans.push_back(*std::move(op));
  }
  for (uint32_t elements : {40u, 160u, 640u, 2560u, 10240u, 40960u}) {
    for (int32_t value : {1, 2}) {
      // A cumulative sum of [value, 0, 0, ...]: every output word is `value`.
      Tensor input = Tensor::Allocate(DataType::kInt32, {elements});
      int32_t* data = input.mutable_data_as<int32_t>();
      for (uint32_t i = 0; i < elements; ++i) data[i] = i == 0 ? value : 0;
      absl::StatusOr<ScanOperation> op = MakeScanOperation(
          OperatorKind::kCumulativeSummation, input, 0, AxisDirection::kIncreasing, false);
      ASSERT_TRUE(op.ok());
      flag_like.push_back(*std::move(op));
    }
  }
  for (int run = 0; run < 4; ++run) {
    for (const Strategy& strategy : {Strategies()[0], Strategies()[3]}) {
      RunAndCheck(flag_like, Strategies()[1]);  // serial: outputs only, no look-back state
      RunAndCheck({scans[run % 2]}, strategy);
    }
  }
}

// 64-bit sums whose low words carry on (almost) every addition.
TEST(ScanKernelTest, Int64SumsCarryIntoTheHighWord) {
  for (DataType type : {DataType::kInt64, DataType::kUint64}) {
    Tensor input = Tensor::Allocate(type, {5000});
    uint64_t* values = input.mutable_data_as<uint64_t>();
    for (int i = 0; i < 5000; ++i) {
      values[i] = (i % 3 == 0) ? 0xffffffffull : (i % 3 == 1 ? 0x80000001ull : ~uint64_t{0});
    }
    absl::StatusOr<ScanOperation> op = MakeScanOperation(OperatorKind::kCumulativeSummation, input,
                                                         0, AxisDirection::kIncreasing, false);
    ASSERT_TRUE(op.ok());
    for (const Strategy& strategy : Strategies()) RunAndCheck({*op}, strategy);
  }
}

// Odd element counts of 16-bit types: the last dword is half padding, and
// neighbouring lines share dwords.
TEST(ScanKernelTest, SixteenBitOddSizesAndSharedDwords) {
  reference::RandomOperationGenerator generator(99);
  std::vector<Operation> operations;
  const Shape shapes[] = {{1}, {3}, {5, 3}, {7, 33, 3}, {1, 1001}};
  for (DataType type : {DataType::kFloat16, DataType::kUint16}) {
    const OperatorKind kind = type == DataType::kUint16 ? OperatorKind::kCumulativeProduct
                                                        : OperatorKind::kCumulativeSummation;
    for (const Shape& shape : shapes) {
      for (uint32_t axis = 0; axis < shape.size(); ++axis) {
        absl::StatusOr<ScanOperation> op =
            MakeScanOperation(kind, generator.RandomTensor(kind, type, shape), axis,
                              AxisDirection::kDecreasing, axis % 2 == 0);
        ASSERT_TRUE(op.ok());
        operations.push_back(*std::move(op));
      }
    }
  }
  for (const Strategy& strategy : Strategies()) RunAndCheck(operations, strategy);
}

// More groups than D3D12's 65535 per dimension: the planner spreads them over
// a 2-D grid and the kernels renumber them.
TEST(ScanKernelTest, MoreThan65535GroupsUseATwoDimensionalGrid) {
  reference::RandomOperationGenerator generator(3);
  Tensor input =
      generator.RandomTensor(OperatorKind::kCumulativeSummation, DataType::kInt32, {70000, 40});
  absl::StatusOr<ScanOperation> op = MakeScanOperation(
      OperatorKind::kCumulativeSummation, std::move(input), 1, AxisDirection::kDecreasing, true);
  ASSERT_TRUE(op.ok());
  std::vector<Operation> operations = {*op};
  std::vector<WorkItem> items(1);
  items[0].operation = &operations[0];
  absl::StatusOr<DispatchPlan> plan = PlanBatch(absl::MakeSpan(items));
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->dispatches.size(), 1u);  // one group per line
  EXPECT_EQ(plan->dispatches[0].groups_x, 65535u);
  EXPECT_EQ(plan->dispatches[0].groups_y, 2u);
  RunAndCheck(operations, Strategies()[0]);
}

// A long strided axis with many lines: one thread per line (coalesced: a
// warp reads 32 adjacent lines' elements), exact for every kind.
TEST(ScanKernelTest, StridedAxesWithManyLinesRunOneThreadPerLine) {
  reference::RandomOperationGenerator generator(11);
  std::vector<Operation> operations;
  for (const ScanKind& k : AllScanKinds()) {
    for (int variant = 0; variant < 2; ++variant) {
      Tensor input = generator.RandomTensor(k.kind, k.type, {2, 70, 1030});
      absl::StatusOr<ScanOperation> op = MakeScanOperation(
          k.kind, std::move(input), 1,
          variant ? AxisDirection::kDecreasing : AxisDirection::kIncreasing, variant == 1);
      ASSERT_TRUE(op.ok()) << op.status();
      operations.push_back(*std::move(op));
    }
  }
  absl::StatusOr<DispatchPlan> plan = PlanAlone(operations[0]);
  ASSERT_TRUE(plan.ok());
  ASSERT_FALSE(plan->dispatches.empty());
  EXPECT_TRUE(absl::StartsWith(plan->dispatches[0].kernel, "scan.serial/"))
      << plan->dispatches[0].kernel;
  RunAndCheck(operations, Strategies()[0]);
}

TEST(ScanPlannerTest, OneStagePerPassAndBarriersBetweenStages) {
  Tensor input = Tensor::Allocate(DataType::kFloat16, {2, 5000});
  absl::StatusOr<ScanOperation> op = MakeScanOperation(OperatorKind::kCumulativeSummation, input, 1,
                                                       AxisDirection::kIncreasing, false);
  ASSERT_TRUE(op.ok());
  std::vector<Operation> operations = {*op, *op};
  std::vector<WorkItem> items(2);
  items[0].operation = &operations[0];
  items[1].operation = &operations[1];
  absl::StatusOr<DispatchPlan> plan = PlanBatch(absl::MakeSpan(items), Strategies()[3].options);
  ASSERT_TRUE(plan.ok());
  // clear, lookback, pack16: three stages of two jobs.
  ASSERT_EQ(plan->dispatches.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(plan->dispatches[i].barrier_after, i == 1 || i == 3) << i;
  }
  EXPECT_EQ(plan->dispatches[0].kernel, "scan.clear");
  EXPECT_EQ(plan->dispatches[2].kernel, "scan.lookback/sum/f16/inc/incl/t64p4/w128");
  EXPECT_EQ(plan->dispatches[4].kernel, "scan.pack16/f16");
}

}  // namespace
}  // namespace dmlserve::d3d12
