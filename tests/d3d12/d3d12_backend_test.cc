// The D3D12 backend as the scheduler sees it: CreateD3D12Devices (adapter
// selection, logical devices, naming) and dmlserve::Device behaviour
// (failure routing, fault injection, overlap, memory), with the product
// kernels and planner, on vkd3d + lavapipe.

#include "kernels/d3d12/d3d12_backend.h"

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/core/operation.h"
#include "kernels/d3d12/d3d12_device.h"
#include "kernels/d3d12/device_runtime.h"
#include "kernels/d3d12/logical_devices.h"
#include "tests/d3d12/runtime_test_util.h"
#include "tests/d3d12/test_kernels.h"
#include "tests/reference/random_operations.h"
#include "tests/reference/reference.h"

namespace dmlserve {
namespace {

using ::testing::HasSubstr;

int TestAdapterIndex() {
  absl::StatusOr<AdapterInfo> adapter = d3d12::testing::TestAdapter();
  EXPECT_TRUE(adapter.ok()) << adapter.status();
  return adapter.ok() ? adapter->index : -1;
}

D3D12Options TestAdapterOptions() {
  D3D12Options options;
  options.adapter_indices = {TestAdapterIndex()};
  options.allow_software = true;
  return options;
}

std::unique_ptr<Device> OneDevice(D3D12Options options) {
  absl::StatusOr<std::vector<std::unique_ptr<Device>>> devices = CreateD3D12Devices(options);
  EXPECT_TRUE(devices.ok()) << devices.status();
  if (!devices.ok() || devices->empty()) return nullptr;
  return std::move(devices->front());
}

// A cumulative summation of `n` int32 values (a scan every planner handles).
Operation IntegerSum(uint32_t n, uint64_t seed) {
  reference::RandomOperationGenerator generator(seed);
  Tensor input =
      generator.RandomTensor(OperatorKind::kCumulativeSummation, DataType::kInt32, Shape{n});
  absl::StatusOr<ScanOperation> op = MakeScanOperation(
      OperatorKind::kCumulativeSummation, std::move(input), 0, AxisDirection::kIncreasing, false);
  EXPECT_TRUE(op.ok()) << op.status();
  return *op;
}

TEST(CreateD3D12DevicesTest, SeveralLogicalDevicesPerAdapter) {
  D3D12Options options = TestAdapterOptions();
  options.devices_per_adapter = 3;
  options.inflight_batches_per_device = 4;
  absl::StatusOr<std::vector<std::unique_ptr<Device>>> devices = CreateD3D12Devices(options);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 3u);
  absl::StatusOr<std::vector<AdapterInfo>> adapters = EnumerateAdapters();
  ASSERT_TRUE(adapters.ok());
  const AdapterInfo& adapter = (*adapters)[options.adapter_indices[0]];
  for (size_t i = 0; i < devices->size(); ++i) {
    const DeviceDescription& description = (*devices)[i]->description();
    EXPECT_EQ(description.name, "d3d12:" + std::to_string(i));
    EXPECT_EQ(description.backend, "d3d12");
    EXPECT_EQ(description.description, adapter.name);
    EXPECT_EQ(description.software, adapter.software);
    EXPECT_EQ((*devices)[i]->max_inflight_batches(), 4);
    EXPECT_GT((*devices)[i]->memory_bytes(), 0u);
  }
  // Each logical device computes on its own queue, at the same time.
  std::vector<Operation> operations;
  for (int i = 0; i < 3; ++i) operations.push_back(IntegerSum(5000, 100 + i));
  std::vector<WorkItem> items(3);
  std::vector<absl::Status> results(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    items[i].operation = &operations[i];
    threads.emplace_back(
        [&, i] { results[i] = (*devices)[i]->Execute(absl::MakeSpan(&items[i], 1)); });
  }
  for (std::thread& thread : threads) thread.join();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i];
    ASSERT_TRUE(items[i].status.ok()) << items[i].status;
    EXPECT_TRUE(reference::CheckOutput(operations[i], items[i].output).ok());
  }
}

TEST(CreateD3D12DevicesTest, SoftwareAdaptersOnlyWhenAllowed) {
  int software = -1;
  if (absl::StatusOr<std::vector<AdapterInfo>> all = EnumerateAdapters(); all.ok()) {
    for (const AdapterInfo& adapter : *all) {
      if (adapter.software && software < 0) software = adapter.index;
    }
  }
  if (software < 0 && std::getenv("DMLSERVE_TEST_D3D12_ADAPTER") != nullptr) {
    GTEST_SKIP() << "no software adapter beside the GPU chosen by DMLSERVE_TEST_D3D12_ADAPTER";
  }
  ASSERT_GE(software, 0) << "no software D3D12 adapter (lavapipe)";
  D3D12Options options;
  options.adapter_indices = {software};
  absl::Status status = CreateD3D12Devices(options).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;

  // "auto": every hardware adapter, never a software one.
  absl::StatusOr<std::vector<AdapterInfo>> adapters = EnumerateAdapters();
  ASSERT_TRUE(adapters.ok());
  int hardware = 0;
  for (const AdapterInfo& adapter : *adapters) hardware += adapter.software ? 0 : 1;
  absl::StatusOr<std::vector<std::unique_ptr<Device>>> devices = CreateD3D12Devices(D3D12Options());
  if (hardware == 0) {
    EXPECT_TRUE(absl::IsNotFound(devices.status())) << devices.status();
  } else {
    ASSERT_TRUE(devices.ok()) << devices.status();
    EXPECT_EQ(devices->size(), static_cast<size_t>(hardware));
    for (const auto& device : *devices) EXPECT_FALSE(device->description().software);
  }
}

TEST(CreateD3D12DevicesTest, RejectsBadOptions) {
  D3D12Options options = TestAdapterOptions();
  options.devices_per_adapter = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(CreateD3D12Devices(options).status()));
  options = TestAdapterOptions();
  options.inflight_batches_per_device = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(CreateD3D12Devices(options).status()));
  options = TestAdapterOptions();
  options.adapter_indices = {1000};
  EXPECT_TRUE(absl::IsInvalidArgument(CreateD3D12Devices(options).status()));
  options = TestAdapterOptions();
  options.adapter_indices.push_back(options.adapter_indices[0]);
  EXPECT_TRUE(absl::IsInvalidArgument(CreateD3D12Devices(options).status()));
}

TEST(D3D12DeviceTest, FaultInjectionTakesTheDeviceOutOfRotation) {
  D3D12Options options = TestAdapterOptions();
  options.fail_after_batches = 1;
  std::unique_ptr<Device> device = OneDevice(options);
  ASSERT_NE(device, nullptr);
  Operation operation = IntegerSum(100, 7);
  WorkItem item;
  item.operation = &operation;
  ASSERT_TRUE(device->Execute(absl::MakeSpan(&item, 1)).ok());
  ASSERT_TRUE(item.status.ok()) << item.status;
  EXPECT_TRUE(reference::CheckOutput(operation, item.output).ok());

  // The second batch finds the device "removed": Execute itself fails (the
  // scheduler re-queues the jobs), not the items.
  WorkItem second;
  second.operation = &operation;
  absl::Status status = device->Execute(absl::MakeSpan(&second, 1));
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("DXGI_ERROR_DEVICE_REMOVED"));
  EXPECT_THAT(status.message(), HasSubstr("d3d12:0"));
  EXPECT_TRUE(second.status.ok());
  EXPECT_FALSE(second.output.present());
  // And stays out.
  WorkItem third;
  third.operation = &operation;
  EXPECT_TRUE(absl::IsUnavailable(device->Execute(absl::MakeSpan(&third, 1))));
}

// Failures that are the batch's, not the device's: the planner rejects the
// batch, or the plan names a kernel that does not build. The items fail,
// Execute succeeds, and the device keeps working. The planner here doubles
// an INT32 tensor with the test kernels, so that it can be made to fail.
TEST(D3D12DeviceTest, BatchFailuresFailTheItemsNotTheDevice) {
  enum class Mode { kRejectBatch, kUnknownKernel, kWork };
  Mode mode = Mode::kRejectBatch;
  d3d12::BatchPlanner planner =
      [&mode](absl::Span<WorkItem> items) -> absl::StatusOr<d3d12::DispatchPlan> {
    if (mode == Mode::kRejectBatch) return absl::InvalidArgumentError("cannot plan this batch");
    const Tensor& input = std::get<ScanOperation>(*items[0].operation).input;
    const uint32_t n = static_cast<uint32_t>(input.element_count());
    d3d12::DispatchPlan plan;
    d3d12::BufferSpec in;
    in.kind = d3d12::BufferKind::kUpload;
    in.size_bytes = input.byte_size();
    in.host_bytes = input.bytes;
    plan.buffers = {in, d3d12::testing::DeviceBuffer(d3d12::BufferKind::kOutput, n)};
    plan.dispatches = {d3d12::testing::AddDispatch(0, 0, 1, n, 0)};
    if (mode == Mode::kUnknownKernel) plan.dispatches[0].kernel = "test/missing";
    WorkItem* item = &items[0];
    plan.finish = [item, input](d3d12::ReadBackBuffers& outputs) {
      item->output = Tensor::Allocate(input.data_type, input.sizes);
      item->output.bytes = outputs[1];
      return absl::OkStatus();
    };
    return plan;
  };
  absl::StatusOr<std::vector<std::unique_ptr<Device>>> devices = d3d12::CreateLogicalDevices(
      TestAdapterOptions(), planner, d3d12::testing::TestKernelLibrary());
  ASSERT_TRUE(devices.ok()) << devices.status();
  Device& device = *devices->front();
  Operation operation = IntegerSum(300, 9);
  const Tensor& input = std::get<ScanOperation>(operation).input;

  WorkItem rejected;
  rejected.operation = &operation;
  EXPECT_TRUE(device.Execute(absl::MakeSpan(&rejected, 1)).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(rejected.status)) << rejected.status;

  mode = Mode::kUnknownKernel;
  WorkItem unbuildable;
  unbuildable.operation = &operation;
  EXPECT_TRUE(device.Execute(absl::MakeSpan(&unbuildable, 1)).ok());
  EXPECT_TRUE(absl::IsInternal(unbuildable.status)) << unbuildable.status;
  EXPECT_THAT(unbuildable.status.message(), HasSubstr("test/missing"));

  mode = Mode::kWork;
  WorkItem works;
  works.operation = &operation;
  ASSERT_TRUE(device.Execute(absl::MakeSpan(&works, 1)).ok());
  ASSERT_TRUE(works.status.ok()) << works.status;
  std::vector<uint32_t> in = d3d12::testing::Words(input.bytes->view());
  std::vector<uint32_t> out = d3d12::testing::Words(works.output.bytes->view());
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], 2 * in[i]) << i;
}

TEST(D3D12DeviceTest, BatchesOverlapOnOneDevice) {
  D3D12Options options = TestAdapterOptions();
  options.inflight_batches_per_device = 2;
  std::unique_ptr<Device> device = OneDevice(options);
  ASSERT_NE(device, nullptr);
  ASSERT_EQ(device->max_inflight_batches(), 2);
  constexpr int kThreads = 2, kBatches = 8;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int b = 0; b < kBatches; ++b) {
        std::vector<Operation> operations = {IntegerSum(3000 + 100 * b, 10 * t + b),
                                             IntegerSum(70, 10 * t + b + 5)};
        std::vector<WorkItem> items(2);
        for (int i = 0; i < 2; ++i) items[i].operation = &operations[i];
        absl::Status status = device->Execute(absl::MakeSpan(items));
        for (int i = 0; status.ok() && i < 2; ++i) {
          status = items[i].status.ok() ? reference::CheckOutput(operations[i], items[i].output)
                                        : items[i].status;
        }
        if (!status.ok()) {
          failures[t] = std::string(status.message());
          return;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  auto* d3d12_device = dynamic_cast<d3d12::D3D12Device*>(device.get());
  ASSERT_NE(d3d12_device, nullptr);
  EXPECT_EQ(d3d12_device->runtime().stats().submissions, uint64_t{kThreads * kBatches});
}

}  // namespace
}  // namespace dmlserve
